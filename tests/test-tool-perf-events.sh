#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tools/nbdkit-perf-events turns the probe notes of the server and of a
# plugin .so into named, typed perf events whose strings perf decodes:
# add them, record a captive server that nbdsh reads 4096 bytes at
# offset 1 MiB from, and perf script must show the read as
#   request_start: ... id=1 cookie=1 command=0 offset=1048576 count=4096 flags=0
# with the strings of connection_accept and export_select decoded, and
# the example plugin's own probes named from a declaration file.  Then
# `del' must remove every event.
# This fails if the events are numbered (argN), if a string shows as an
# address, if an operand is translated wrongly (offset/count/cookie
# would read another register or stack slot), if the semaphore is not
# passed (sites under _ENABLED(), such as request_start, never fire),
# or if del leaves an event behind.
source "$(dirname "$0")/functions.sh"
requires_cmd perf nbdsh readelf
requires_root
requires_probes
requires perf --version
requires test -e /sys/kernel/tracing/uprobe_events

tool="$abs_top_builddir/tools/nbdkit-perf-events"

# Installed, the tool finds the installed probes.d by itself: its dry
# run names request_start's and layer_call_start's fields (argN if
# probes.d was not installed or not found).  Done before taking the tracing lock, as it is slow.
install_to_destdir
installed="$dest$prefix/bin/nbdkit-perf-events"
[ -x "$installed" ] || fail "$installed was not installed"
[ -f "$dest$prefix/share/nbdkit/probes.d" ] || fail "probes.d was not installed"
"$installed" add -n -b "$server_binary" request_start layer_call_start \
  > "$tmpdir/dry" 2>&1 ||
  { cat "$tmpdir/dry"; fail "installed nbdkit-perf-events add -n failed"; }
cat "$tmpdir/dry"
grep -Eq '^p:nbdkit/request_start .*:0x[0-9a-f]+\(0x[0-9a-f]+\) id=.* count=[^ ]*:u64 flags=[^ ]*:u64$' \
  "$tmpdir/dry" || fail "installed tool: request_start is not named and typed"
grep -Eq '^p:nbdkit/layer_call_start .* layer=\+0\(.*\):string .* count=[^ ]*:u64$' \
  "$tmpdir/dry" || fail "installed tool: layer_call_start's strings are not typed"

tracing_lock
example="$abs_top_builddir/plugins/example/.libs/nbdkit-example-plugin.so"
[ -f "$example" ] || fail "$example was not built"
export PERF_PAGER=cat

# A group of our own, so that a user's "nbdkit" events are left alone.
g="nbdkit_test$$"
cleanup_fn "$tool" --group "$g" -q del

# The example plugin's probes are not in server/probes.d: declare two.
cat > "$tmpdir/example.d" <<'EOF'
provider nbdkit {
  probe example_config (const char *key, const char *value);
  probe example_read (uint64_t id, uint64_t cookie, uint64_t offset,
                      uint64_t count);
};
EOF

t "$tool" --group "$g" add -b "$server_binary" -b "$example" \
  -d "$tmpdir/example.d" > "$tmpdir/add" 2>&1 ||
  { cat "$tmpdir/add"; fail "nbdkit-perf-events add failed"; }
cat "$tmpdir/add"
grep -q "^$g:request_start (1 site) id cookie command offset count flags$" \
  "$tmpdir/add" || fail "add did not report request_start with its fields"
grep -q "perf record -e '$g:\*'" "$tmpdir/add" ||
  fail "add did not print the perf command"

"$tool" --group "$g" list > "$tmpdir/list"
cat "$tmpdir/list"
for p in connection_accept export_select request_start request_done \
         example_config example_read; do
  grep -q "^$g:$p " "$tmpdir/list" || fail "list has no $g:$p"
done
grep -q "^$g:example_read  id cookie offset count  \[$(realpath "$example")\]$" \
  "$tmpdir/list" || fail "list: example_read is not from the plugin"

# The same probe from an older binary must not break the tool: only
# the probes in the notes are made (a glob that matches none warns).
"$tool" --group "$g" add -n -b "$server_binary" 'no_such_probe*' \
  > "$tmpdir/none" 2>&1 && fail "add of no probe succeeded"
grep -q 'no probe matches no_such_probe\*' "$tmpdir/none" ||
  { cat "$tmpdir/none"; fail "add did not say that nothing matched"; }

t perf record -q -a -o "$tmpdir/perf.data" \
  -e "$g:connection_accept" -e "$g:export_select" \
  -e "$g:request_start" -e "$g:request_done" \
  -e "$g:example_config" -e "$g:example_read" -- \
  "$NBDKIT" -U - example size=2M \
    --run 'nbdsh -u "nbd+unix:///perfexp?socket=$unixsocket" \
             -c "h.pread(4096, 1048576)"'
perf script -i "$tmpdir/perf.data" > "$tmpdir/script" 2>&1
cat "$tmpdir/script"

read_line="$(grep " $g:request_start: " "$tmpdir/script" |
             grep ' command=0 ' | head -1)"
[ -n "$read_line" ] || fail "no request_start with command=0 (read)"
echo "$read_line" | grep -Eq ' offset=1048576 count=4096 flags=0$' ||
  fail "request_start: offset and count are not 1048576 and 4096"
id_cookie="$(echo "$read_line" | grep -Eo 'id=[0-9]+ cookie=[0-9]+')"
grep " $g:request_done: " "$tmpdir/script" |
  grep -q " $id_cookie command=0 error=0 bytes=4096 " ||
  fail "no request_done for the read ($id_cookie, 4096 bytes)"
grep " $g:connection_accept: " "$tmpdir/script" |
  grep -Eq ' id=[0-9]+ fd=[0-9]+ peer="[^"]*" transport="unix" pid=[0-9]+ uid=0$' ||
  fail "connection_accept: transport is not the string \"unix\""
grep " $g:export_select: " "$tmpdir/script" |
  grep -Eq ' export="perfexp" size=2097152 ' ||
  fail "export_select: export is not the string \"perfexp\""
grep " $g:example_config: " "$tmpdir/script" |
  grep -q ' key="size" value="2M"$' ||
  fail "example_config (plugin .so): strings not decoded"
grep " $g:example_read: " "$tmpdir/script" |
  grep -Eq ' id=1 cookie=[0-9]+ offset=1048576 count=4096$' ||
  fail "example_read (plugin .so): offset and count wrong"
if grep -q ' arg[0-9]=' "$tmpdir/script"; then
  fail "some events still have numbered arguments"
fi

# del removes them all: none in the kernel, and perf knows them no more.
t "$tool" --group "$g" del > "$tmpdir/del"
grep -q "^removed $g:request_start$" "$tmpdir/del" ||
  fail "del did not report request_start"
if grep "^[pr]:$g/" /sys/kernel/tracing/uprobe_events; then
  fail "del left events behind"
fi
[ -z "$("$tool" --group "$g" list)" ] || fail "list is not empty after del"
if perf record -q -o "$tmpdir/gone.data" -e "$g:request_start" -- true \
     > "$tmpdir/gone" 2>&1; then
  fail "perf still records $g:request_start after del"
fi
