#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Plugin errors reach the client as the right NBD errors.  The fault
# plugin fails every data call (pread, pwrite, flush, trim, zero,
# extents, cache) with a chosen errno via nbdkit_set_error; nbdsh must
# see, for each call:
#   EIO, ENOMEM, EINVAL, ENOSPC, EPERM, ESHUTDOWN   as they are
#   EDQUOT, EFBIG -> ENOSPC; EROFS -> EPERM           (the NBD spec)
#   EOVERFLOW -> EINVAL, but EOVERFLOW on a read with DF
#   ENOTSUP -> EINVAL, but ENOTSUP on a zero with FAST_ZERO
#                                      (the spec allows them only there)
#   ENOENT, ETIMEDOUT, EBADMSG -> EINVAL   (no NBD word for them)
#   no nbdkit_set_error, errno not preserved -> EIO
# and the connection stays usable after each failure.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh

plugin="$abs_builddir/.libs/fault-plugin.so"
[ -f "$plugin" ] || fail "$plugin not built (make check builds it)"

cat > "$tmpdir/check.py" <<'PY'
import errno, os
import nbd

plugin_errno, want_name = os.environ["PERR"], os.environ["WANT"]
expect = getattr(errno, want_name)
h = nbd.NBD()
h.add_meta_context(nbd.CONTEXT_BASE_ALLOCATION)
h.connect_uri(os.environ["uri"])
assert h.can_fast_zero() and h.can_df() and h.can_trim(), "flags"

def fails_with(name, want, fn):
    try:
        fn()
    except nbd.Error as ex:
        assert ex.errnum == want, "%s with plugin errno %s: client saw %s, " \
            "expected %s" % (name, plugin_errno, errno.errorcode.get(
                ex.errnum, ex.errnum), errno.errorcode[want])
        return
    raise AssertionError("%s succeeded, expected %s" % (name, plugin_errno))

calls = [
    ("pread", lambda: h.pread(512, 0)),
    ("pwrite", lambda: h.pwrite(b"x" * 512, 0)),
    ("flush", lambda: h.flush()),
    ("trim", lambda: h.trim(512, 0)),
    ("zero", lambda: h.zero(512, 0)),
    ("block_status", lambda: h.block_status(512, 0, lambda *a: 0)),
]
if h.can_cache():
    calls.append(("cache", lambda: h.cache(512, 0)))
for name, fn in calls:
    fails_with(name, expect, fn)

# Only a read with DF may carry EOVERFLOW, only a fast zero ENOTSUP.
if plugin_errno == "EOVERFLOW":
    fails_with("pread DF", errno.EOVERFLOW,
               lambda: h.pread_structured(512, 0, lambda *a: 0,
                                          nbd.CMD_FLAG_DF))
else:
    fails_with("pread DF", expect, lambda: h.pread_structured(512, 0, lambda *a: 0,
                                          nbd.CMD_FLAG_DF))
if plugin_errno in ("ENOTSUP", "EOPNOTSUPP"):
    fails_with("fast zero", errno.ENOTSUP,
               lambda: h.zero(512, 0, nbd.CMD_FLAG_FAST_ZERO))
else:
    fails_with("fast zero", expect,
               lambda: h.zero(512, 0, nbd.CMD_FLAG_FAST_ZERO))
assert h.aio_in_flight() == 0
h.shutdown()
print("%s -> %s: ok (%d calls)" % (plugin_errno, want_name, len(calls) + 2))
PY

failcalls=pread,pwrite,flush,trim,zero,extents,cache
# plugin errno : what the client must see
for pair in EIO:EIO ENOMEM:ENOMEM EINVAL:EINVAL ENOSPC:ENOSPC EPERM:EPERM \
            ESHUTDOWN:ESHUTDOWN EDQUOT:ENOSPC EFBIG:ENOSPC EROFS:EPERM \
            EOVERFLOW:EINVAL ENOTSUP:EINVAL EOPNOTSUPP:EINVAL \
            ENOENT:EINVAL ETIMEDOUT:EINVAL EBADMSG:EINVAL 0:EIO; do
  perr=${pair%%:*} want=${pair#*:}
  PERR=$perr WANT=$want t "$NBDKIT" -U - "$plugin" fail="$failcalls" \
    error="$perr" \
    --run "export uri; nbdsh -c 'exec(open(\"$tmpdir/check.py\").read())'" \
    2> "$tmpdir/server.err" ||
    { cat "$tmpdir/server.err" >&2; fail "plugin errno $perr: see above"; }
  # The plugin's own message reached the log.
  grep -q "fails as asked" "$tmpdir/server.err" ||
    fail "plugin errno $perr: the plugin's error message was not logged"
done

# Nothing failing: the same calls succeed (the test can tell success).
t "$NBDKIT" -U - "$plugin" --run 'nbdsh -u "$uri" -c "
h.pwrite(b\"y\" * 512, 0)
assert h.pread(512, 0) == b\"y\" * 512
h.flush(); h.trim(512, 0); h.zero(512, 0)
"'
