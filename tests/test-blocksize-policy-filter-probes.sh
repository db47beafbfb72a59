#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# blocksize_policy_reject fires for each request the error policy
# refuses, with its offset, count and command, and not for the
# requests it lets through.
source "$(dirname "$0")/functions.sh"
requires_root
requires_cmd bpftrace nbdsh
tracing_lock

so="$(filter_so blocksize-policy)"
start_server --filter=blocksize-policy memory 1M \
  blocksize-error-policy=error blocksize-minimum=512 blocksize-maximum=4096
trace_start "$tmpdir/trace" "
usdt:$so:nbdkit:blocksize_policy_reject /arg0 != 0 && arg1 != 0/ {
  printf(\"reject %d %d %s\n\", arg2, arg3, str(arg4)); }"
t nbdsh -u "$uri" -c '
h.set_strict_mode(0)
h.pread(512, 1024)
for fn in (lambda: h.pread(100, 3), lambda: h.pwrite(b"x" * 512, 700),
           lambda: h.zero(1000, 0), lambda: h.trim(511, 512)):
    try:
        fn()
    except nbd.Error as e:
        assert e.errno == "EINVAL", e
    else:
        raise AssertionError("request not refused")
h.zero(8192, 0)
'
trace_stop
cat "$tmpdir/trace"
grep '^reject' "$tmpdir/trace" > "$tmpdir/got"
cat > "$tmpdir/want" <<'EOF'
reject 3 100 pread
reject 700 512 pwrite
reject 0 1000 zero
reject 512 511 trim
EOF
diff -u "$tmpdir/want" "$tmpdir/got" ||
  fail "blocksize_policy_reject: unexpected events"
