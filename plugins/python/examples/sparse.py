# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A sparse RAM disk that reports its holes: data is kept in 64 KiB
# blocks, allocated when first written, freed by trim and by a zero
# that may trim.  extents() tells the client which blocks hold data,
# so "nbdinfo --map" and "qemu-img map" show the layout and nbdcopy
# skips the holes.
#
#   nbdkit python sparse.py size=1G

import threading

import nbdkit

API_VERSION = 2
BLOCK = 64 * 1024

size = 1024 * 1024 * 1024
blocks = {}                     # block number -> bytearray(BLOCK)
lock = threading.Lock()


def config(key, value):
    global size
    if key == "size":
        size = nbdkit.parse_size(value)
    else:
        raise ValueError("unknown parameter %s" % key)


def thread_model():
    return nbdkit.THREAD_MODEL_PARALLEL


def open(readonly):
    return 1


def get_size(h):
    return size


def can_multi_conn(h):
    return True


def can_fast_zero(h):
    return True


def pread(h, buf, offset, flags):
    pos = 0
    with lock:
        while pos < len(buf):
            blk, off = divmod(offset + pos, BLOCK)
            n = min(BLOCK - off, len(buf) - pos)
            b = blocks.get(blk)
            buf[pos:pos + n] = b[off:off + n] if b else bytes(n)
            pos += n


def pwrite(h, buf, offset, flags):
    pos = 0
    with lock:
        while pos < len(buf):
            blk, off = divmod(offset + pos, BLOCK)
            n = min(BLOCK - off, len(buf) - pos)
            b = blocks.get(blk)
            if b is None:
                b = blocks[blk] = bytearray(BLOCK)
            b[off:off + n] = buf[pos:pos + n]
            pos += n


def zero(h, count, offset, flags):
    # Whole blocks are dropped (they read back as zero); the edges of
    # the range are zeroed in place.
    pos = 0
    with lock:
        while pos < count:
            blk, off = divmod(offset + pos, BLOCK)
            n = min(BLOCK - off, count - pos)
            if n == BLOCK:
                blocks.pop(blk, None)
            elif blk in blocks:
                blocks[blk][off:off + n] = bytes(n)
            pos += n


def trim(h, count, offset, flags):
    zero(h, count, offset, flags)


def extents(h, count, offset, flags):
    out = []
    end = offset + count
    blk = offset // BLOCK
    with lock:
        while blk * BLOCK < end:
            start = max(blk * BLOCK, offset)
            stop = min((blk + 1) * BLOCK, end)
            kind = 0 if blk in blocks else \
                nbdkit.EXTENT_HOLE | nbdkit.EXTENT_ZERO
            if out and out[-1][2] == kind:
                o, n, k = out[-1]
                out[-1] = (o, n + stop - start, k)
            else:
                out.append((start, stop - start, kind))
            blk += 1
    return out
