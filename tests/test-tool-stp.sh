#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tools/nbdkit.stp.in, the SystemTap tapset, against server/probes.d and
# the built binary:
#  1. consistency (always): tools/probes-check.py finds one alias per
#     probe, one variable per argument, named as in probes.d and read
#     from $argN at its position, user_string() for strings only;
#  2. elaboration: `stap -p2' resolves every alias (nbdkit.*) with every
#     variable (argstr) against server/nbdkit, and `stap -p2' of every
#     probe's $arg1..$argN, raw, proves SystemTap can read every
#     argument the server passes;
#  3. live (only where stap can build and load a module, i.e. with the
#     running kernel's build tree): count request_done per command
#     while a client sends 10 reads and 5 writes.
# stap -p2 needs a kernel build tree only to look at its config; where
# /lib/modules/$(uname -r)/build is missing, a stub tree (kernel.release,
# .config, Module.symvers) in $tmpdir stands in, as userspace probes need
# nothing from it.
source "$(dirname "$0")/functions.sh"
requires_cmd python3
probes_d="$abs_top_srcdir/server/probes.d"
tapset_in="$abs_top_srcdir/tools/nbdkit.stp.in"

# 1. Consistency.
python3 "$abs_top_srcdir/tools/probes-check.py" "$probes_d" stp "$tapset_in" ||
  fail "tapset and probes.d disagree"

requires_cmd stap
requires grep -q '^#define ENABLE_PROBES 1' "$abs_top_builddir/config.h"

mkdir "$tmpdir/tapset"
sed "s|@NBDKIT_BINARY@|$server_binary|g" "$tapset_in" > "$tmpdir/tapset/nbdkit.stp"
stap_r=()
if [ ! -e "/lib/modules/$(uname -r)/build/.config" ]; then
  k="$tmpdir/kernel"
  mkdir -p "$k/include/config"
  uname -r > "$k/include/config/kernel.release"
  printf "CONFIG_%s=y\n" TRACEPOINTS ARCH_SUPPORTS_UPROBES UPROBES > "$k/.config"
  : > "$k/Module.symvers"
  stap_r=(-r "$k")
  echo "$0: no kernel build tree for $(uname -r): stub tree for stap -p2"
fi
# stap (4.8) repeats a "Parse error" per unreadable SDT operand: drop those.
filter () { grep -Ev '^(Parse error:|[[:space:]]+-?[0-9]+@|-*\^$)' || :; }

# 2a. Every alias and every variable elaborate.
if ! stap -p2 "${stap_r[@]}" -I "$tmpdir/tapset" \
       -e 'probe nbdkit.* { printf("%s %s\n", probe_name, argstr) }' \
       > "$tmpdir/p2" 2> "$tmpdir/p2.err"; then
  filter < "$tmpdir/p2.err"
  fail "stap -p2 of the tapset failed"
fi
n_aliases="$(grep -c '^probe nbdkit\.' "$tapset_in")"
n_sites="$(grep -c '^process(' "$tmpdir/p2" || :)"
echo "$0: stap -p2 resolved $n_aliases aliases to $n_sites probe sites"

# 2b. Every argument of every probe, read raw.
python3 - "$probes_d" "$server_binary" > "$tmpdir/raw.stp" <<'PY'
import re, sys
text = re.sub(r"/\*.*?\*/", "", open(sys.argv[1]).read(), flags=re.S)
for name, args in re.findall(r"\bprobe\s+(\w+)\s*\(([^)]*)\)\s*;", text):
    n = len([a for a in args.split(",") if a.strip()])
    vals = ", ".join("$arg%d" % i for i in range(1, n + 1)) or "0"
    print('probe process("%s").mark("%s") { println(%s) }'
          % (sys.argv[2], name, vals))
PY
if ! stap -p2 "${stap_r[@]}" "$tmpdir/raw.stp" > /dev/null 2> "$tmpdir/raw.err"
then
  filter < "$tmpdir/raw.err" | grep -E 'WARNING: Can.t parse|semantic error' |
    sort -u
  fail "stap cannot read every probe argument (see above)"
fi

# 3. Live, only where stap can build a module.
if [ ${#stap_r[@]} -ne 0 ]; then
  echo "$0: no kernel build tree: live run skipped"
  exit 0
fi
requires_cmd nbdsh
requires_root
tracing_lock
start_server memory 64M
timeout -k 120 120 stap -I "$tmpdir/tapset" -x "$server_pid" -e '
probe begin { printf("READY\n") }
probe nbdkit.request_done { n[command] <<< bytes }
probe end { foreach (c in n) printf("command %d count %d bytes %d\n", c,
                                    @count(n[c]), @sum(n[c])) }
' > "$tmpdir/out" 2> "$tmpdir/err" &
tool=$!
cleanup_fn _kill_pid "$tool"
wait_for_output "$tmpdir/out" READY "$tool" 120 || { filter < "$tmpdir/err"; fail "stap did not start"; }
t nbdsh -u "$uri" -c '
for i in range(10):
    h.pread(4096, i * 4096)
for i in range(5):
    h.pwrite(b"w" * 65536, 1048576 + i * 65536)
'
kill -INT "$tool"
wait "$tool" || :
cat "$tmpdir/out"
grep -q '^command 0 count 10 bytes 40960$' "$tmpdir/out" || fail "reads"
grep -q '^command 1 count 5 bytes 327680$' "$tmpdir/out" || fail "writes"
