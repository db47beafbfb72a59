#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# nbdkit(1)'s other options, each doing what the page says: --log=null,
# --selinux-label (accepted; refused clearly where a label would have
# to be applied, as this build has no libselinux), --swap, --stdin (an
# alias of -s: plugins are told stdio is not theirs), --export (an
# alias of -e), -s --dump-plugin refused, a bad option hinting --help,
# and --filter=nosuch blaming the filter.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo

# --log=null: errors and debug messages go nowhere (the exit status
# still tells).
if "$NBDKIT" --log=null -v -U - memory 1M nokey=1 --run true \
     > "$tmpdir/out" 2> "$tmpdir/err"; then
  fail "--log=null: a bad parameter was accepted"
fi
[ ! -s "$tmpdir/err" ] || { cat "$tmpdir/err"; fail "--log=null printed"; }
t "$NBDKIT" --log=null -U - memory 1M --run 'nbdinfo --size "$uri"' \
  > "$tmpdir/out"
[ "$(cat "$tmpdir/out")" = 1048576 ] || fail "--log=null did not serve"

# --selinux-label: no socket of ours to label with -s, so it serves;
# with -U the label cannot be applied and it says so.
t nbdsh -c - > "$tmpdir/out" <<PY
h.connect_command(["$NBDKIT", "-s", "--selinux-label=system_u:object_r:svirt_socket_t:s0", "memory", "1M"])
print(h.get_size())
PY
[ "$(cat "$tmpdir/out")" = 1048576 ] || fail "--selinux-label -s did not serve"
if "$NBDKIT" -U - --selinux-label=system_u:object_r:svirt_socket_t:s0 \
     memory 1M --run true 2> "$tmpdir/err"; then
  fail "--selinux-label was silently ignored on a Unix socket"
fi
cat "$tmpdir/err"
grep -q -- '--selinux-label.*SELinux' "$tmpdir/err" ||
  fail "--selinux-label: no clear message"

# --swap: the serving process's memory is locked.
t "$NBDKIT" -U - --swap -t 1 memory 1M \
  --run 'awk "/^VmLck:/ { print \$2 }" /proc/$PPID/status' \
  > "$tmpdir/lck"
# AddressSanitizer replaces mlockall with a no-op: there the option can
# only be seen to be accepted.
if [ -z "${NBDKIT_SANITIZERS:-}" ]; then
  [ "$(cat "$tmpdir/lck")" -gt 0 ] || fail "--swap: no memory locked"
fi
t "$NBDKIT" -U - -t 1 memory 1M \
  --run 'awk "/^VmLck:/ { print \$2 }" /proc/$PPID/status' \
  > "$tmpdir/lck"
[ "$(cat "$tmpdir/lck")" -eq 0 ] || fail "memory locked without --swap"

# --stdin is -s: one connection on stdin/stdout ...
t nbdsh -c - > "$tmpdir/out" <<PY
h.connect_command(["$NBDKIT", "--stdin", "memory", "1M"])
h.pwrite(b"abcd", 0)
print(h.pread(4, 0).decode())
PY
[ "$(cat "$tmpdir/out")" = abcd ] || fail "--stdin did not serve"
# ... and a plugin asking nbdkit_stdio_safe is told no: Debian's cc
# plugin then refuses to read its script from stdin.
cc_plugin="$debian_plugindir/nbdkit-cc-plugin.so"
if [ -r "$cc_plugin" ]; then
  if "$NBDKIT" --stdin "$cc_plugin" - < /dev/null 2> "$tmpdir/err"; then
    fail "--stdin: the cc plugin read its script from stdin"
  fi
  grep -q 'incompatible with -s' "$tmpdir/err" ||
    { cat "$tmpdir/err"; fail "--stdin: nbdkit_stdio_safe said yes"; }
fi

# --export=NAME is -e NAME.
t "$NBDKIT" -U - --export=foo memory 1M --run 'echo "$exportname $uri"' \
  > "$tmpdir/out"
grep -Eq '^foo nbd\+unix:///foo\?socket=' "$tmpdir/out" ||
  fail "--export: $(cat "$tmpdir/out")"

# -s --dump-plugin: an error on stderr, nothing on stdout.
if "$NBDKIT" -s --dump-plugin memory > "$tmpdir/out" 2> "$tmpdir/err"; then
  fail "-s --dump-plugin succeeded"
fi
[ ! -s "$tmpdir/out" ] || fail "-s --dump-plugin printed on stdout"
grep -q -- '--dump-plugin' "$tmpdir/err" || fail "-s --dump-plugin: no message"

# A bad option hints at --help.
for bad in --no-such-option -x; do
  "$NBDKIT" -U - $bad memory 1M --run true 2> "$tmpdir/err" &&
    fail "$bad accepted"
  grep -q -- "--help" "$tmpdir/err" || fail "$bad: no --help hint"
done

# An unknown filter is blamed, not the plugin loaded before it.
"$NBDKIT" -U - --filter=nosuch memory 1M --run true 2> "$tmpdir/err" &&
  fail "--filter=nosuch accepted"
cat "$tmpdir/err"
grep -q 'filter.*nosuch' "$tmpdir/err" || fail "the message does not name the filter"
grep -q 'memory' "$tmpdir/err" && fail "the message blames the memory plugin"
exit 0
