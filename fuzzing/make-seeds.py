#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# fuzzing/make-seeds.py: writes the seed corpora, corpus-connection/ (whole
# client streams) and corpus-transmission/ (a selector byte, then
# requests: see fuzz-transmission.c).  Deterministic; the output is
# committed.  Run from anywhere: python3 fuzzing/make-seeds.py
import os
import sys

sys.dont_write_bytecode = True   # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nbdwire import *  # noqa: E402,F401,F403

here = os.path.dirname(os.path.abspath(__file__))


def data(n, seed):
    return bytes((seed + i * 7) & 0xFF for i in range(n))


def io_requests(ext=False, status=False):
    """A little of every command, then NBD_CMD_DISC."""
    r = lambda *a, **k: request(*a, extended=ext, **k)  # noqa: E731
    out = r(CMD_WRITE, 4096, 512, cookie=1, payload=data(512, 1))
    out += r(CMD_READ, 4000, 700, cookie=2)
    out += r(CMD_WRITE_ZEROES, 0, 8192, CMD_FLAG_NO_HOLE, cookie=3)
    out += r(CMD_TRIM, 8192, 4096, CMD_FLAG_FUA, cookie=4)
    out += r(CMD_FLUSH, cookie=5)
    out += r(CMD_CACHE, 0, 65536, cookie=6)
    if status:
        out += r(CMD_BLOCK_STATUS, 0, DISK_SIZE, cookie=7)
        out += r(CMD_BLOCK_STATUS, 4096, 100, CMD_FLAG_REQ_ONE, cookie=8)
    out += r(CMD_READ, DISK_SIZE - 10, 10, cookie=9)
    out += r(CMD_DISC, cookie=10)
    return out


def error_requests(ext=False):
    """Requests the server must refuse, then a bad magic."""
    r = lambda *a, **k: request(*a, extended=ext, **k)  # noqa: E731
    out = r(CMD_READ, DISK_SIZE, 1, cookie=11)                # past the end
    out += r(CMD_WRITE, DISK_SIZE - 1, 2, cookie=12, payload=b"ab")
    out += r(CMD_READ, 0, 0, cookie=13)                       # zero length
    out += r(CMD_READ, 2**64 - 512, 1024, cookie=14)          # wraps
    out += r(99, 0, 512, cookie=15)                           # unknown
    out += r(CMD_READ, 0, 512, 0x40, cookie=16)               # unknown flag
    out += r(CMD_BLOCK_STATUS, 0, 512, cookie=17)
    out += r(CMD_WRITE_ZEROES, 0, 512, CMD_FLAG_FAST_ZERO, cookie=18)
    out += r(CMD_READ, 0, 512, CMD_FLAG_DF, cookie=19)
    out += b"\xde\xad\xbe\xef" + bytes(24)
    return out


def connection_seeds():
    yield "go-simple", (client_flags() + info_go(OPT_GO) + io_requests())
    yield "structured-meta", (
        client_flags() + option(OPT_STRUCTURED_REPLY) +
        meta(OPT_SET_META_CONTEXT) +
        info_go(OPT_GO, b"", (INFO_BLOCK_SIZE, INFO_NAME)) +
        io_requests(status=True))
    yield "extended", (
        client_flags() + option(OPT_EXTENDED_HEADERS) +
        meta(OPT_SET_META_CONTEXT) + info_go(OPT_GO) +
        io_requests(ext=True, status=True) )
    yield "export-name", (
        client_flags(FLAG_C_FIXED_NEWSTYLE) + option(OPT_STRUCTURED_REPLY) +
        option(OPT_EXPORT_NAME) + io_requests())
    yield "options", (
        client_flags() + option(OPT_LIST) +
        info_go(OPT_INFO, b"", (INFO_NAME, INFO_DESCRIPTION,
                                INFO_BLOCK_SIZE)) +
        option(OPT_STARTTLS) + option(OPT_LIST_META_CONTEXT, bytes(8)) +
        option(OPT_STRUCTURED_REPLY) +
        meta(OPT_LIST_META_CONTEXT, b"", (b"base:",)) +
        meta(OPT_LIST_META_CONTEXT) + option(42, b"x") + option(OPT_ABORT))
    yield "bad-options", (
        client_flags() + meta(OPT_SET_META_CONTEXT) +
        option(OPT_STRUCTURED_REPLY, b"x") + option(OPT_GO, b"\0\0\0\x09") +
        info_go(OPT_GO, b"nosuch\0name") + option(OPT_EXTENDED_HEADERS) +
        option(OPT_EXTENDED_HEADERS) +
        meta(OPT_SET_META_CONTEXT, b"other") + info_go(OPT_GO) +
        error_requests(ext=True))
    yield "errors", (client_flags() + option(OPT_STRUCTURED_REPLY) +
                     info_go(OPT_GO) + error_requests())


def transmission_seeds():
    yield "simple", b"\x00" + io_requests()
    yield "structured", b"\x01" + io_requests() + error_requests()
    yield "structured-meta", b"\x02" + io_requests(status=True)
    yield "extended", b"\x03" + io_requests(ext=True, status=True)
    yield "extended-errors", b"\x03" + (
        request(CMD_READ, 0, 16, CMD_FLAG_PAYLOAD_LEN, cookie=20,
                payload=bytes(16), extended=True) +
        request(CMD_WRITE, 0, 64, CMD_FLAG_PAYLOAD_LEN, cookie=21,
                payload=data(64, 3), extended=True) +
        error_requests(ext=True))
    yield "readonly", b"\x06" + io_requests(status=True)


def write_corpus(name, seeds):
    d = os.path.join(here, name)
    os.makedirs(d, exist_ok=True)
    for old in os.listdir(d):
        if old.startswith("seed-"):
            os.unlink(os.path.join(d, old))
    for label, blob in seeds:
        with open(os.path.join(d, "seed-%s" % label), "wb") as f:
            f.write(blob)


write_corpus("corpus-connection", connection_seeds())
write_corpus("corpus-transmission", transmission_seeds())
