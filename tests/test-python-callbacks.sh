#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Every callback, as the script sees it, is the same under Debian's
# nbdkit 1.32 python plugin and ours: python-callbacks.py defines them
# all and logs each call with its arguments (the buffer's type and
# whether it is read-only, the flags, the export name); the same
# client runs against both servers, with API_VERSION 1 and 2, and the
# sets of calls logged must be equal.  Also --dump-plugin: the script's
# dump_plugin runs after the plugin's own lines.  Catches a callback
# called with other arguments or argument types, one not called at
# all, and a difference between the API versions.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo
debian_nbdkit=/usr/bin/nbdkit
[ -x "$debian_nbdkit" ] && [ -f "$debian_plugindir/nbdkit-python-plugin.so" ] ||
  { echo "$0: SKIP: Debian's nbdkit python plugin is not installed"; exit 77; }
[ -f "$abs_top_builddir/plugins/python/.libs/nbdkit-python-plugin.so" ] ||
  { echo "$0: SKIP: the python plugin is not built"; exit 77; }

script="$abs_top_srcdir/tests/python-callbacks.py"
client="$abs_top_srcdir/tests/python-client.py"

for api in 1 2; do
  for s in debian ours; do
    server="$NBDKIT"; [ "$s" = ours ] || server="$debian_nbdkit"
    log="$tmpdir/log.$api.$s"
    API=$api LOG="$log" t "$server" -U - python "$script" a=1 b=2 \
      --run "nbdinfo --list \"\$uri\" >/dev/null &&
             nbdsh --base-allocation -u \"\$uri\" \
               -c 'exec(open(\"$client\").read())' &&
             nbdsh -u \"nbd+unix:///second?socket=\$unixsocket\" \
               -c 'h.pread(512, 0)'" \
      > "$tmpdir/out.$api.$s" ||
      fail "API $api: $server failed"
    sort -u "$log" > "$log.sorted"
  done
  cat "$tmpdir/log.$api.ours.sorted"
  grep -q '^pwrite memoryview(readonly=True' "$tmpdir/log.$api.ours.sorted" ||
    fail "API $api: pwrite did not get a read-only memoryview"
  diff -u "$tmpdir/log.$api.debian.sorted" "$tmpdir/log.$api.ours.sorted" ||
    fail "API $api: the callbacks differ between Debian's plugin and ours"
  diff -u "$tmpdir/out.$api.debian" "$tmpdir/out.$api.ours" ||
    fail "API $api: the client's view differs"
done
grep -q '^pread memoryview(readonly=False,len=' "$tmpdir/log.2.ours.sorted" ||
  fail "API 2: pread did not get a writable memoryview"
grep -q '^zero 1000 80000 False$' "$tmpdir/log.1.ours.sorted" ||
  fail "API 1: zero did not get may_trim=False"

LOG=/dev/null t "$NBDKIT" python "$script" --dump-plugin > "$tmpdir/dump"
cat "$tmpdir/dump"
grep -q '^python_version=3\.' "$tmpdir/dump" || fail "no python_version"
grep -qx 'nbdkit_python_maximum_api_version=2' "$tmpdir/dump" ||
  fail "no nbdkit_python_maximum_api_version"
[ "$(tail -n1 "$tmpdir/dump")" = callbacks_script=yes ] ||
  fail "the script's dump_plugin did not print last"
t "$NBDKIT" python --dump-plugin | grep -q '^python_pep_384_abi_version=' ||
  fail "--dump-plugin without a script"

# The magic key spelled out: the same plugin.
LOG=/dev/null t "$NBDKIT" -U - python script="$script" \
  --run 'nbdinfo --size "$uri"' > "$tmpdir/size"
[ "$(cat "$tmpdir/size")" = 1048576 ] || fail "script=SCRIPT: wrong size"
