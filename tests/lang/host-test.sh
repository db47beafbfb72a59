# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/lang/host-test.sh LANG ASPECT: one driver for the tests of the
# lua, perl, ruby and tcl plugin hosts.  Sourced (not run) by the
# wrappers tests/test-LANG-plugin[-ASPECT].sh, so that each pair is a
# test of its own and messages still name the wrapper ($0).
#
# The table (LANG x ASPECT; "-": no such test, the host has no case for
# it):
#
#          plugin  errors  probes  memory
#   lua    yes     yes     yes     yes
#   perl   yes     yes     yes     yes
#   ruby   yes     yes     yes     -
#   tcl    yes     yes     yes     -
#
#   plugin  same script, same bytes as Debian's nbdkit 1.32 host; the
#           can_* answers, --dump-plugin, what the language adds, and
#           the server calls of 1.34..1.40 (lang/server-calls.sh)
#   errors  a callback that fails or answers wrongly: the client's
#           errno, one log line naming the script and the callback, the
#           server still serving; start-up errors: one line, exit 1
#   probes  LANG_call_start/LANG_call_done around each callback with the
#           request's ids, duration, errno and message, and the
#           script's probe helper firing the server's "user" probe
#   memory  the server's RSS stays flat over a second batch of requests
#
# What differs by language is a row of settings (below) and
# tests/lang/LANG.sh: its scripts (lang_script NAME), the messages its
# host logs, and the checks only that language has (lang_plugin,
# lang_errors).  The shared steps are the functions below.
source "$(dirname "$0")/functions.sh"
lang="$1"
aspect="$2"
case "$lang/$aspect" in
  lua/* | perl/* | ruby/plugin | ruby/errors | ruby/probes | tcl/plugin | \
    tcl/errors | tcl/probes) ;;
  *) fail "host-test.sh: no test $aspect for $lang (see the table)" ;;
esac
so="$abs_top_builddir/plugins/$lang/.libs/nbdkit-$lang-plugin.so"

# The settings that differ by language, a row each (why: lang/LANG.sh):
#   ext      the scripts' file name extension
#   absent   the host not built: skip, or fail the test
#   compare  yes: compare runs with Debian's host (perl-lua-compare.sh)
#            in the plugin and errors aspects
#   match    start_fails: WANT is a regex (-G) or text (-F)
#   one      yes: start_fails looks in the only line with "error"
#   open     the name of the open callback (probes)
#   min_ns   a pread of the probe script takes longer than this (probes)
# and, set by lang/LANG.sh: $probe_message, $lang_sanitizers (why the
# host cannot run in a sanitizer build, if it cannot).
_lang_row ()
{
  lang_ext=$1 lang_absent=$2 lang_compare=$3 lang_match=$4
  lang_one_error=
  [ "$5" = no ] || lang_one_error=yes
  probe_open=$6 probe_min_ns=$7
}
#                   ext  absent compare match one open        min_ns
case "$lang" in
  lua)  _lang_row lua  skip   yes     -G    no  open        199999999 ;;
  perl) _lang_row pl   skip   yes     -G    no  open        199999999 ;;
  ruby) _lang_row rb   fail   no      -F    yes open        1000000 ;;
  tcl)  _lang_row tcl  fail   no      -F    no  plugin_open 1000000 ;;
esac
lang_sanitizers=
source "$(dirname "${BASH_SOURCE[0]}")/$lang.sh"
[ -z "$lang_sanitizers" ] || skip_under_sanitizers "$lang_sanitizers"
if [ "$aspect" = probes ] || [ "$lang_absent" = fail ]; then
  [ -f "$so" ] || fail "$so not built"
else
  requires test -f "$so"
fi
ref_nbdkit=/usr/bin/nbdkit
# perl and lua compare whole runs with Debian's host (same_script).
if [ "$lang_compare" = yes ] && [ "$aspect" != probes ] &&
   [ "$aspect" != memory ]; then
  source "$(dirname "$0")/perl-lua-compare.sh"
fi

# start_fails WHAT WANT ARGS...: "nbdkit -U - LANG ARGS" must not start
# (exit 1) and must say WANT ($lang_match: -E for a regex, -F for a
# fixed string) in a line; with $lang_one_error, in its only line with
# "error".
start_fails ()
{
  local what="$1" want="$2"
  shift 2
  if t "$NBDKIT" -U - "$lang" "$@" --run true > "$tmpdir/out" 2> "$tmpdir/err"
  then
    fail "$what: the server started"
  fi
  cat "$tmpdir/out" "$tmpdir/err"
  if [ -n "$lang_one_error" ]; then
    [ "$(cat "$tmpdir/out" "$tmpdir/err" | grep -c 'error')" -eq 1 ] ||
      fail "$what: expected one error line"
  fi
  cat "$tmpdir/out" "$tmpdir/err" | grep -q "$lang_match" -- "$want" ||
    fail "$what: no line '$want'"
}

# expect_line TEXT: the server's log ($tmpdir/log) has TEXT in a line.
expect_line ()
{
  grep -Fq "$1" "$tmpdir/log" || fail "no log line: $1"
}

# both_hosts NAME SCRIPT RUN [-v]: run "nbdkit -U - LANG SCRIPT --run
# RUN" under ours (with -v if asked; stderr in NAME.err) and under
# Debian's, into $tmpdir/NAME.ours and NAME.ref.
both_hosts ()
{
  local name="$1" script="$2" run="$3" v="${4-}"
  t "$NBDKIT" $v -U - "$lang" "$script" --run "$run" \
    > "$tmpdir/$name.ours" 2> "$tmpdir/$name.err" || {
    cat "$tmpdir/$name.ours" "$tmpdir/$name.err"
    fail "$name: the script failed"
  }
  t "$ref_nbdkit" -U - "$lang" "$script" --run "$run" \
    > "$tmpdir/$name.ref" || fail "$name: the script failed with Debian's nbdkit"
}

# serial_copy SCRIPT: one interpreter, serialize_all_requests: two
# clients with 16 requests in flight each copy the same bytes as from
# Debian's host (two calls at once into one interpreter would corrupt
# it; SCRIPT may also check that itself).
serial_copy ()
{
  local copy2='for i in 1 2; do
  nbdcopy --requests=16 "$uri" - | sha256sum > '"$tmpdir"'/copy.$i &
done; wait; cat '"$tmpdir"'/copy.1 '"$tmpdir"'/copy.2'
  both_hosts serial "$1" "$copy2"
  cat "$tmpdir/serial.ours"
  [ "$(sort -u "$tmpdir/serial.ours" | wc -l)" -eq 1 ] &&
    cmp "$tmpdir/serial.ours" "$tmpdir/serial.ref" ||
    fail "parallel clients copied other bytes than with Debian's nbdkit"
}

# flag_bits SCRIPT WANT DEBUG: a client writes, writes with FUA, zeroes
# with and without NO_HOLE and flushes; SCRIPT returns, in its first
# bytes, what its callbacks saw.  Both hosts agree, ours saw WANT, and
# under -v the log has the script's debug line DEBUG (a regex).
flag_bits ()
{
  local flagclient='nbdsh -u "$uri" -c "
h.pwrite(b\"a\", 0)
h.pwrite(b\"b\", 4096, nbd.CMD_FLAG_FUA)
h.zero(512, 8192)
h.zero(512, 8704, nbd.CMD_FLAG_NO_HOLE)
h.flush()
print(h.pread(64, 0).decode().strip())
"'
  both_hosts flagbits "$1" "$flagclient" -v
  cat "$tmpdir/flagbits.ours"
  cmp "$tmpdir/flagbits.ours" "$tmpdir/flagbits.ref" ||
    fail "the callbacks saw other arguments than with Debian's host: $(cat "$tmpdir/flagbits.ref")"
  grep -qx "$2" "$tmpdir/flagbits.ours" || fail "unexpected arguments"
  grep -q "$3" "$tmpdir/flagbits.err" || fail "no debug line '$3'"
}

# shebang_serves BODY: a script run as a program, "#!.../nbdkit LANG"
# in its first line then BODY (a get_size of 12345), makes the kernel
# run "nbdkit LANG SCRIPT ARGS": the magic key at work.
shebang_serves ()
{
  printf '#!%s %s\n%s\n' "$NBDKIT" "$lang" "$1" > "$tmpdir/shebang.$lang_ext"
  chmod +x "$tmpdir/shebang.$lang_ext"
  [ "$(t "$tmpdir/shebang.$lang_ext" -U - --run 'nbdinfo --size "$uri"')" = 12345 ] ||
    fail "a shebang script does not serve"
}

# ramdisk_client: for ruby and tcl, whose 1.32 hosts are compared with
# ours on a RAM disk example of size 3145728: $client, the nbdsh
# commands (writes, FUA write, zero, trim, flush, a refused fast zero,
# then the size, an md5 of the disk and a few bytes), and $info, the
# flags and size as nbdinfo prints them (not the URI, nor the block
# sizes our server advertises and 1.32's does not).
ramdisk_client ()
{
  requires_cmd nbdsh nbdinfo
  requires test -x "$ref_nbdkit"
  client='
import hashlib
h.pwrite(b"hello, '"$lang"' " * 400, 4096)
h.pwrite(bytes(range(256)) * 64, 1048576 - 100)
h.pwrite(b"\xff" * 512, 0, nbd.CMD_FLAG_FUA)
h.zero(1000, 4200)
h.zero(4096, 2097152 - 4096)
h.zero(2048, 2097152 + 4096, nbd.CMD_FLAG_NO_HOLE)
h.trim(512, 3145728 - 512)
h.flush()
try:
    h.zero(512, 8192, nbd.CMD_FLAG_FAST_ZERO)
    print("fast zero: ok")
except nbd.Error as e:
    print("fast zero:", e.errno)
print("size:", h.get_size())
print("md5:", hashlib.md5(h.pread(3145728, 0)).hexdigest())
print("tail:", h.pread(16, 1048576 - 8).hex())
'
  info='nbdinfo "$uri" | grep -E "export-size|is_|can_"'
}

# The memory aspect: after a first batch of 20000 requests (reads and
# writes) and 300 connections warms the interpreter up, a second batch
# as big must not grow the server's resident size by more than 1 MiB.
# The script (lang_script flat) gives each handle 8 KiB, so that
# handles never released show.
memory_test ()
{
  requires_cmd nbdsh
  skip_under_sanitizers "RSS there is ASan's quarantine and shadow memory, not the plugin's"
  lang_script flat > "$tmpdir/flat.$lang_ext"
  start_server "$lang" "$tmpdir/flat.$lang_ext"
  rss () { awk '$1 == "VmRSS:" { print $2 }' "/proc/$server_pid/status"; }
  # Requests, and connections (each an open and a close, whose handle
  # must be released).
  local batch='
for i in range(10000):
    h.pread(512, (i * 512) % 65024)
    h.pwrite(b"x" * 16, (i * 16) % 65520)
for i in range(300):
    c = nbd.NBD()
    c.connect_uri(h.get_uri())
    c.pread(512, 0)
    c.shutdown()
'
  t nbdsh -u "$uri" -c "$batch" || fail "the first batch failed"
  local before after
  before=$(rss)
  t nbdsh -u "$uri" -c "$batch" || fail "the second batch failed"
  after=$(rss)
  echo "VmRSS: $before KiB after the first batch, $after KiB after the second"
  [ "$after" -le $(( before + 1024 )) ] ||
    fail "the server grew by $(( after - before )) KiB over a batch"
}

# The probes aspect, under bpftrace.  The script (lang_script probe):
# config fires the user probe "${lang}conf" 7 -3 "KEY=VALUE"; pread at
# 8192 fails with ENOSPC and the message $probe_message (what the done
# probe carries, its start; bpftrace cuts it at 64 bytes); any other
# pread takes more than $probe_min_ns and fires "${lang}read" COUNT
# -OFFSET "read COUNT at OFFSET".  The open callback is $probe_open.
# config fires the call probes outside any connection (id and cookie
# 0), open inside one with cookie 0, and each pread with the ids of its
# request_start.  It would catch a probe missing on an error path, ids
# not passed (or another thread's), a wrong duration or errno, a lost
# message, and the probe helper not reaching nbdkit_probe or its
# arguments shifted.
probes_test ()
{
  requires_tracer nbdsh timeout
  local script="$tmpdir/probe.$lang_ext"
  lang_script probe > "$script"

  # bpftrace first: config fires while the server starts.
  user_probe_program > "$tmpdir/trace.bt"
  cat >> "$tmpdir/trace.bt" <<BT
usdt:$so:nbdkit:${lang}_call_start {
  printf("%llu call %d %d %s\n", nsecs, arg0, arg1, str(arg2));
}
usdt:$so:nbdkit:${lang}_call_done {
  printf("%llu done %d %d %s %d %d [%s]\n", nsecs, arg0, arg1, str(arg2),
         arg3 > $probe_min_ns, arg4, str(arg5));
}
BT
  local bt
  start_bpftrace 60 "$tmpdir/out" "$tmpdir/out.err" "$tmpdir/trace.bt"

  t "$NBDKIT" -U - "$lang" "$script" size=1 --run 'nbdsh -u "$uri" -c "
h.pread(2048, 4096)
try:
    h.pread(512, 8192)
    raise Exception(\"the read at 8192 did not fail\")
except nbd.Error as e:
    assert e.errno == \"ENOSPC\", e.errno
"' || fail "the $lang plugin under bpftrace failed"
  sleep 1
  interrupt_tracer "$bt"
  trace_in_order "$tmpdir/out" > "$tmpdir/sorted"
  cat "$tmpdir/sorted"

  local p="${lang}_call" id
  grep -q '^call 0 0 config$' "$tmpdir/sorted" || fail "no ${p}_start config"
  grep -q '^done 0 0 config 0 0 \[\]$' "$tmpdir/sorted" ||
    fail "no ${p}_done config (id 0, cookie 0, errno 0)"
  grep -q "^user 0 0 ${lang}conf 7 -3 \\[size=1\\]\$" "$tmpdir/sorted" ||
    fail "no user probe ${lang}conf"
  set -- $(awk -v f="$probe_open" '$1 == "call" && $4 == f' "$tmpdir/sorted")
  [ "$#" -eq 4 ] || fail "no ${p}_start for $probe_open"
  id=$2
  [ "$id" -gt 0 ] && [ "$3" -eq 0 ] || fail "$probe_open: id $id, cookie $3"
  grep -q "^done $id 0 $probe_open [01] 0 \\[\\]\$" "$tmpdir/sorted" ||
    fail "no ${p}_done for $probe_open"
  set -- $(awk -v id="$id" '$1 == "start" && $2 == id && $4 == 0 && $5 == 4096' \
             "$tmpdir/sorted")
  [ "$#" -eq 5 ] || fail "no request_start for the read"
  grep -q "^call $2 $3 pread\$" "$tmpdir/sorted" ||
    fail "no ${p}_start pread with the read's id $2 and cookie $3"
  grep -q "^done $2 $3 pread 1 0 \\[\\]\$" "$tmpdir/sorted" ||
    fail "no ${p}_done pread (> $probe_min_ns ns, errno 0) with id $2 cookie $3"
  grep -q "^user $2 $3 ${lang}read 2048 -4096 \\[read 2048 at 4096\\]\$" \
    "$tmpdir/sorted" ||
    fail "no user probe ${lang}read with the read's id $2 and cookie $3"
  set -- $(awk -v id="$id" '$1 == "start" && $2 == id && $4 == 0 && $5 == 8192' \
             "$tmpdir/sorted")
  [ "$#" -eq 5 ] || fail "no request_start for the failing read"
  grep -Fq "done $2 $3 pread 0 28 [$probe_message" "$tmpdir/sorted" ||
    fail "no ${p}_done pread (errno 28, '$probe_message') with id $2 cookie $3"
  echo "OK: the $lang plugin's probes"
}

# same_example (perl and lua): the host's RAM disk example ($ex), run
# by Debian's nbdkit 1.32 host and by ours, also named by script=,
# gives the client the same size, flags, write outcomes, map and bytes
# read back.
same_example ()
{
  ex="$abs_top_srcdir/plugins/$lang/examples/ramdisk.$lang_ext"
  same_script ramdisk "$lang" "$ex" size=3145728
  same_script ramdisk-odd "$lang" script="$ex" size=1049088
}

case "$aspect" in
  plugin)
    [ "$lang_compare" = no ] || same_example
    lang_plugin
    # disconnect, parse_probability and parse_delay (lang_script calls).
    source "$(dirname "${BASH_SOURCE[0]}")/server-calls.sh"
    lang_script calls > "$tmpdir/calls.$lang_ext"
    server_calls_check "$lang" "$tmpdir/calls.$lang_ext"
    ;;
  errors) lang_errors ;;
  probes) probes_test ;;
  memory) memory_test ;;
esac
