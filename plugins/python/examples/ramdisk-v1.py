# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The RAM disk of ramdisk.py written to API_VERSION 1, the callbacks'
# original signatures (no API_VERSION line means version 1):
#
#   pread(h, count, offset)            returns count bytes
#   pwrite(h, buf, offset)
#   flush(h)
#   trim(h, count, offset)
#   zero(h, count, offset, may_trim)
#
#   nbdkit python ramdisk-v1.py size=16M
#
# Serves the same bytes as ramdisk.py for the same requests; pread
# costs one more copy (the bytes returned are copied into the reply).

import nbdkit

size = 64 * 1024 * 1024
disk = None


def config(key, value):
    global size
    if key == "size":
        size = nbdkit.parse_size(value)
    else:
        raise ValueError("unknown parameter %s" % key)


def config_complete():
    global disk
    disk = bytearray(size)


def open(readonly):
    return 1


def get_size(h):
    return len(disk)


def pread(h, count, offset):
    return disk[offset:offset + count]


def pwrite(h, buf, offset):
    disk[offset:offset + len(buf)] = buf


def zero(h, count, offset, may_trim):
    disk[offset:offset + count] = bytes(count)


def trim(h, count, offset):
    disk[offset:offset + count] = bytes(count)


def flush(h):
    pass
