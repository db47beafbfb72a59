# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# fuzzing/nbdwire.py: the client side of the NBD protocol as bytes, for
# make-seeds.py and replay.py (stdlib only).  Values follow
# common/protocol.h.  transmission_prefix() must build exactly what
# fuzz-transmission.c sends before an input's requests.

import struct

NEW_VERSION = 0x49484156454F5054        # "IHAVEOPT"
REQUEST_MAGIC = 0x25609513
EXTENDED_REQUEST_MAGIC = 0x21E41C71

FLAG_C_FIXED_NEWSTYLE = 1
FLAG_C_NO_ZEROES = 2

OPT_EXPORT_NAME = 1
OPT_ABORT = 2
OPT_LIST = 3
OPT_STARTTLS = 5
OPT_INFO = 6
OPT_GO = 7
OPT_STRUCTURED_REPLY = 8
OPT_LIST_META_CONTEXT = 9
OPT_SET_META_CONTEXT = 10
OPT_EXTENDED_HEADERS = 11

INFO_EXPORT = 0
INFO_NAME = 1
INFO_DESCRIPTION = 2
INFO_BLOCK_SIZE = 3

CMD_READ = 0
CMD_WRITE = 1
CMD_DISC = 2
CMD_FLUSH = 3
CMD_TRIM = 4
CMD_CACHE = 5
CMD_WRITE_ZEROES = 6
CMD_BLOCK_STATUS = 7

CMD_FLAG_FUA = 1 << 0
CMD_FLAG_NO_HOLE = 1 << 1
CMD_FLAG_DF = 1 << 2
CMD_FLAG_REQ_ONE = 1 << 3
CMD_FLAG_FAST_ZERO = 1 << 4
CMD_FLAG_PAYLOAD_LEN = 1 << 5

# The size fuzz-harness.h gives the memory plugin (FUZZ_DISK_SIZE).
DISK_SIZE = 1049810


def client_flags(flags=FLAG_C_FIXED_NEWSTYLE | FLAG_C_NO_ZEROES):
    return struct.pack(">I", flags)


def option(code, payload=b""):
    return struct.pack(">QII", NEW_VERSION, code, len(payload)) + payload


def info_go(code, name=b"", infos=()):
    payload = struct.pack(">I", len(name)) + name
    payload += struct.pack(">H", len(infos))
    payload += b"".join(struct.pack(">H", i) for i in infos)
    return option(code, payload)


def meta(code, name=b"", queries=(b"base:allocation",)):
    payload = struct.pack(">I", len(name)) + name
    payload += struct.pack(">I", len(queries))
    payload += b"".join(struct.pack(">I", len(q)) + q for q in queries)
    return option(code, payload)


def request(cmd, offset=0, count=0, flags=0, cookie=1, payload=b"",
            extended=False):
    if extended:
        head = struct.pack(">IHHQQQ", EXTENDED_REQUEST_MAGIC, flags, cmd,
                           cookie, offset, count)
    else:
        head = struct.pack(">IHHQQI", REQUEST_MAGIC, flags, cmd, cookie,
                           offset, count)
    return head + payload


def transmission_prefix(selector):
    """The handshake fuzz-transmission sends for an input's first byte.
    Returns (bytes, extended, readonly)."""
    mode = selector & 3
    out = client_flags()
    if mode in (1, 2):
        out += option(OPT_STRUCTURED_REPLY)
    if mode == 3:
        out += option(OPT_EXTENDED_HEADERS)
    if mode >= 2:
        out += meta(OPT_SET_META_CONTEXT)
    out += info_go(OPT_GO, b"", (INFO_BLOCK_SIZE,))
    return out, mode == 3, bool(selector & 4)
