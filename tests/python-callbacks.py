# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A python plugin script that defines every callback and writes each
# call, with its arguments as the script sees them, to the file $LOG:
# test-python-callbacks.sh runs it under Debian's nbdkit and ours and
# compares the two logs.  $API chooses the API_VERSION (1 or 2).
import os

import nbdkit

API_VERSION = int(os.environ.get("API", "2"))
log = open(os.environ["LOG"], "a", buffering=1)
disk = bytearray(1024 * 1024)


def note(*words):
    log.write(" ".join(str(w) for w in words) + "\n")


def buftype(buf):
    if isinstance(buf, memoryview):
        return "memoryview(readonly=%s,len=%d)" % (buf.readonly, len(buf))
    return "%s(len=%d)" % (type(buf).__name__, len(buf))


def dump_plugin():
    print("callbacks_script=yes")


def config(key, value):
    note("config", key, value)


def config_complete():
    note("config_complete")


def thread_model():
    note("thread_model")
    return nbdkit.THREAD_MODEL_SERIALIZE_REQUESTS


def get_ready():
    note("get_ready")


def after_fork():
    note("after_fork")


def cleanup():
    note("cleanup")


def preconnect(readonly):
    note("preconnect", readonly)


def list_exports(readonly, is_tls):
    note("list_exports", readonly, is_tls)
    return [("", "the default"), "second", ("third", "3rd")]


def default_export(readonly, is_tls):
    note("default_export", readonly, is_tls)
    return ""


def open(readonly):
    note("open", readonly, repr(nbdkit.export_name()))
    return {"name": nbdkit.export_name()}


def close(h):
    note("close", h["name"])


def export_description(h):
    note("export_description")
    return "described"


def get_size(h):
    note("get_size")
    return len(disk)


def block_size(h):
    note("block_size")
    return (1, 4096, 1024 * 1024)


def is_rotational(h):
    note("is_rotational")
    return True


def can_multi_conn(h):
    note("can_multi_conn")
    return True


for name in ("can_write", "can_flush", "can_trim", "can_zero",
             "can_fast_zero", "can_extents"):
    def f(h, name=name):
        note(name)
        return True
    globals()[name] = f


def can_fua(h):
    note("can_fua")
    return nbdkit.FUA_NATIVE


def can_cache(h):
    note("can_cache")
    return nbdkit.CACHE_NATIVE


if API_VERSION == 1:
    def pread(h, count, offset):
        note("pread", count, offset)
        return disk[offset:offset + count]

    def pwrite(h, buf, offset):
        note("pwrite", buftype(buf), offset)
        disk[offset:offset + len(buf)] = buf

    def flush(h):
        note("flush")

    def trim(h, count, offset):
        note("trim", count, offset)

    def zero(h, count, offset, may_trim):
        note("zero", count, offset, may_trim)
        disk[offset:offset + count] = bytes(count)
else:
    def pread(h, buf, offset, flags):
        note("pread", buftype(buf), offset, flags)
        buf[:] = disk[offset:offset + len(buf)]

    def pwrite(h, buf, offset, flags):
        note("pwrite", buftype(buf), offset, flags)
        disk[offset:offset + len(buf)] = buf

    def flush(h, flags):
        note("flush", flags)

    def trim(h, count, offset, flags):
        note("trim", count, offset, flags)

    def zero(h, count, offset, flags):
        note("zero", count, offset, flags)
        disk[offset:offset + count] = bytes(count)


def cache(h, count, offset, flags):
    note("cache", count, offset, flags)


def extents(h, count, offset, flags):
    note("extents", count, offset, flags)
    return [(offset, min(count, 65536), 0),
            (offset + min(count, 65536), 4096, nbdkit.EXTENT_HOLE)]
