# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Several read-only exports from one script: list_exports names them
# (with a description each), default_export picks the one a client
# gets for "", and each export's contents depend on the name the
# client asked for (nbdkit.export_name()).
#
#   nbdkit python exports.py
#   nbdinfo --list nbd://localhost
#   nbdcopy nbd://localhost/zeroes - | hexdump -C

import nbdkit

API_VERSION = 2

EXPORTS = {
    "hello": ("a greeting", b"hello, world\n" * 4096),
    "zeroes": ("64 KiB of zero", bytes(65536)),
    "pattern": ("each byte its offset mod 256",
                bytes(i % 256 for i in range(1 << 20))),
}


def list_exports(readonly, is_tls):
    return [(name, desc) for name, (desc, _) in EXPORTS.items()]


def default_export(readonly, is_tls):
    return "hello"


def open(readonly):
    name = nbdkit.export_name() or default_export(readonly, False)
    if name not in EXPORTS:
        raise LookupError("no export %r" % name)
    return name


def export_description(h):
    return EXPORTS[h][0]


def get_size(h):
    return len(EXPORTS[h][1])


def can_write(h):
    return False


def can_cache(h):
    return nbdkit.CACHE_NATIVE


def cache(h, count, offset, flags):
    pass


def pread(h, buf, offset, flags):
    data = EXPORTS[h][1]
    buf[:] = data[offset:offset + len(buf)]
