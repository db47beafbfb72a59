# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A disk backed by a file (or a block device):
#
#   nbdkit python file.py file=disk.img [readonly=true]
#
# Reads go straight into the server's buffer (os.preadv), so a read
# is not copied in Python at all; writes pass the client's data to
# os.pwrite as it came.  The holes of a sparse file are reported as
# extents (SEEK_DATA/SEEK_HOLE), and the file's own errors (EIO, ENOSPC)
# reach the client: an OSError carries its errno.  Each connection has
# its own file descriptor, so requests can run in parallel; Python
# releases the GIL during the system calls.

import errno
import os

import nbdkit

API_VERSION = 2

filename = None
readonly = False


def config(key, value):
    global filename, readonly
    if key == "file":
        filename = os.path.abspath(value)
    elif key == "readonly":
        readonly = value.lower() in ("1", "true", "yes", "on")
    else:
        raise ValueError("unknown parameter %s" % key)


def config_complete():
    if filename is None:
        raise ValueError("file=FILENAME is required")


def thread_model():
    return nbdkit.THREAD_MODEL_PARALLEL


def open(ro):
    flags = os.O_RDONLY if ro or readonly else os.O_RDWR
    return {"fd": os.open(filename, flags)}


def close(h):
    os.close(h["fd"])


def get_size(h):
    return os.lseek(h["fd"], 0, os.SEEK_END)


def can_write(h):
    return not readonly


def can_multi_conn(h):
    return True


def can_fua(h):
    return nbdkit.FUA_NATIVE


def pread(h, buf, offset, flags):
    n = os.preadv(h["fd"], [buf], offset)
    if n != len(buf):
        nbdkit.set_error(errno.EIO)
        raise IOError("short read at %d: %d of %d bytes" %
                      (offset, n, len(buf)))


def pwrite(h, buf, offset, flags):
    while len(buf) > 0:
        n = os.pwrite(h["fd"], buf, offset)
        buf = buf[n:]
        offset += n
    if flags & nbdkit.FLAG_FUA:
        os.fdatasync(h["fd"])


def flush(h, flags):
    os.fdatasync(h["fd"])


def extents(h, count, offset, flags):
    fd = h["fd"]
    end = offset + count
    out = []
    while offset < end:
        try:
            data = os.lseek(fd, offset, os.SEEK_DATA)
        except OSError as e:
            if e.errno != errno.ENXIO:
                raise
            data = end          # a hole to the end of the file
        if data > offset:
            hole_end = min(data, end)
            out.append((offset, hole_end - offset,
                        nbdkit.EXTENT_HOLE | nbdkit.EXTENT_ZERO))
            offset = hole_end
            continue
        hole = min(os.lseek(fd, offset, os.SEEK_HOLE), end)
        out.append((offset, hole - offset, 0))
        offset = hole
        if flags & nbdkit.FLAG_REQ_ONE:
            break
    return out
