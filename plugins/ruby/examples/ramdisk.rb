#!/usr/local/sbin/nbdkit ruby
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A RAM disk in Ruby: the disk is one binary String held in a global,
# shared by every connection and lost when the server exits.
#
#   nbdkit ruby ramdisk.rb [size=SIZE]
#
# size= is the disk's size in bytes (default 1048576).  Every byte
# starts as zero; writes, trims and zeroes change it.

$size = 1048576
$disk = nil

def config(key, value)
  raise ArgumentError, "unknown parameter #{key}" unless key == "size"
  raise ArgumentError, "size must be a number of bytes, not #{value}" \
    unless value =~ /\A\d+\z/
  $size = value.to_i
end

def config_complete
  $disk = "\0".b * $size
end

def open(readonly)
  # Every connection sees the same disk: the handle is not used.
  :ramdisk
end

def get_size(h)
  $disk.bytesize
end

def pread(h, count, offset)
  $disk.byteslice(offset, count)
end

def pwrite(h, buf, offset)
  $disk[offset, buf.bytesize] = buf.b
end

def zero(h, count, offset, may_trim)
  $disk[offset, count] = "\0".b * count
end

def trim(h, count, offset)
  zero(h, count, offset, true)
end

def flush(h)
  # Nothing to do: the disk is in memory.
end
