# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A RAM disk: a bytearray served read-write, lost when the server exits.
#
#   nbdkit python ramdisk.py size=1G
#
# API_VERSION 2: pread fills the buffer it is given (a memoryview over
# the server's own reply buffer, so nothing is copied twice) and the
# write callbacks get flags.  Requests run in parallel; a lock keeps a
# resize-free bytearray consistent while slices are assigned.

import errno
import threading

import nbdkit

API_VERSION = 2

size = 64 * 1024 * 1024
disk = None
lock = threading.Lock()


def config(key, value):
    global size
    if key == "size":
        size = nbdkit.parse_size(value)
    else:
        raise ValueError("unknown parameter %s" % key)


def config_complete():
    global disk
    disk = bytearray(size)


def thread_model():
    return nbdkit.THREAD_MODEL_PARALLEL


def open(readonly):
    nbdkit.debug("ramdisk: open readonly=%r" % readonly)
    return {}


def get_size(h):
    return len(disk)


def can_multi_conn(h):
    # Every connection sees the same bytearray.
    return True


def can_fua(h):
    # Nothing to flush: a write is stable as soon as it returns.
    return nbdkit.FUA_NATIVE


def pread(h, buf, offset, flags):
    end = offset + len(buf)
    with lock:
        buf[:] = disk[offset:end]


def pwrite(h, buf, offset, flags):
    end = offset + len(buf)
    with lock:
        disk[offset:end] = buf


def zero(h, count, offset, flags):
    with lock:
        disk[offset:offset + count] = bytes(count)


def trim(h, count, offset, flags):
    zero(h, count, offset, flags)


def flush(h, flags):
    pass
