-- SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
-- A RAM disk in Lua for nbdkit's lua plugin host:
--
--   nbdkit lua ramdisk.lua [size=SIZE]
--
-- The disk is a table of 4 KiB blocks, SIZE bytes in all (default
-- 1 MiB): blocks never written are absent and read as zeroes.  It is
-- shared by every connection and lost when the server exits.
-- Works with Lua 5.3 and 5.4.

local block_size = 4096
local size = 1024 * 1024
local blocks = {}
local zero_block = string.rep ("\0", block_size)

function config (key, value)
   if key ~= "size" then
      error ("unknown parameter " .. key)
   end
   if not string.match (value, "^%d+$") then
      error ("size=" .. value .. ": not a number of bytes")
   end
   size = math.tointeger (tonumber (value))
end

function open (readonly)
   return { readonly = readonly }
end

function get_size (h)
   return size
end

function can_write (h) return true end
function can_flush (h) return true end
function can_trim (h) return true end

-- The bytes [offset, offset + count) of block number i.
local function read_block (i, offset, count)
   local b = blocks[i] or zero_block
   if offset == 0 and count == block_size then
      return b
   end
   return string.sub (b, offset + 1, offset + count)
end

local function write_block (i, offset, data)
   local b = blocks[i] or zero_block
   blocks[i] = string.sub (b, 1, offset) .. data ..
      string.sub (b, offset + #data + 1)
end

function pread (h, count, offset)
   local parts = {}
   while count > 0 do
      local i = offset // block_size
      local o = offset % block_size
      local n = math.min (count, block_size - o)
      parts[#parts + 1] = read_block (i, o, n)
      offset = offset + n
      count = count - n
   end
   return table.concat (parts)
end

function pwrite (h, buf, offset)
   local pos = 1
   while pos <= #buf do
      local i = offset // block_size
      local o = offset % block_size
      local n = math.min (#buf - pos + 1, block_size - o)
      write_block (i, o, string.sub (buf, pos, pos + n - 1))
      offset = offset + n
      pos = pos + n
   end
end

-- Whole blocks are dropped, partial ones written with zeroes.
local function clear (count, offset)
   while count > 0 do
      local i = offset // block_size
      local o = offset % block_size
      local n = math.min (count, block_size - o)
      if n == block_size then
         blocks[i] = nil
      else
         write_block (i, o, string.sub (zero_block, 1, n))
      end
      offset = offset + n
      count = count - n
   end
end

function zero (h, count, offset, may_trim)
   clear (count, offset)
end

function trim (h, count, offset)
   clear (count, offset)
end

function flush (h)
end
