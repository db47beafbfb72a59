#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tools/nbdkit.stp.in, the SystemTap tapset, against server/probes.d and
# the built binary:
#  1. consistency (always): tools/probes-check.py finds one alias per
#     probe, one variable per argument, named as in probes.d and read
#     from $argN at its position, user_string() for strings only, a
#     hierarchical alias (nbdkit.STAGE.EVENT) for every probe, and the
#     tapset's names of commands, options and reply types equal to the
#     server's (it would catch a probe added without an alias, or a
#     command renamed in the server only);
#  2. elaboration: `stap -p2' resolves every alias (nbdkit.*) with every
#     variable (argstr) against server/nbdkit, every hierarchical alias
#     (nbdkit.*.*) with the symbolic variables (cmd, latency_us,
#     errno_name, peer, export, transport, eflags_str, ...) through the
#     conninfo tapset, and `stap -p2' of every probe's $arg1..$argN,
#     raw, proves SystemTap can read every argument the server passes;
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
# The tapset as the build generated it (tools/probes-gen.py).
tapset_in="$abs_top_builddir/tools/nbdkit.stp"

# 1. Consistency.
python3 "$abs_top_srcdir/tools/probes-check.py" "$probes_d" stp "$tapset_in" ||
  fail "tapset and probes.d disagree"
python3 "$abs_top_srcdir/tools/probes-check.py" "$probes_d" names \
  "$tapset_in" || fail "the tapset's names and the server's disagree"
# The checker must catch a tapset broken on purpose: a probe's only
# hierarchical alias gone, and an optional probe's alias made required.
sed -e '/^probe nbdkit\.handshake\.fail = /d' \
    -e 's/^probe nbdkit\.user\.probe = nbdkit\.user ? /probe nbdkit.user.probe = nbdkit.user /' \
  "$tapset_in" > "$tmpdir/bad.stp"
python3 "$abs_top_srcdir/tools/probes-check.py" "$probes_d" stp \
  "$tmpdir/bad.stp" > "$tmpdir/bad.out" || :
cat "$tmpdir/bad.out"
grep -q 'probe handshake_fail has no hierarchical alias' "$tmpdir/bad.out" ||
  fail "checker missed a missing hierarchical alias"
grep -q 'user.probe is on optional nbdkit.user without' \
  "$tmpdir/bad.out" || fail "checker missed a required alias on an optional probe"

requires_cmd stap
requires_probes

# The same tapset on this build tree's server and .so files, as the
# build made it for `stap -I tools/build-tapset' (nbdkit-tracing(1)).
tapset_dir="$abs_top_builddir/tools/build-tapset"
grep -q "process(\"$server_binary\")" "$tapset_dir/nbdkit.stp" ||
  fail "$tapset_dir/nbdkit.stp does not name this build's $server_binary"
[ -f "$tapset_dir/nbdkit_conninfo.stp" ] ||
  fail "$tapset_dir has no nbdkit_conninfo.stp"
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
if ! stap -p2 "${stap_r[@]}" -I "$tapset_dir" \
       -e 'probe nbdkit.* { printf("%s %s\n", probe_name, argstr) }' \
       > "$tmpdir/p2" 2> "$tmpdir/p2.err"; then
  filter < "$tmpdir/p2.err"
  fail "stap -p2 of the tapset failed"
fi
n_aliases="$(grep -c '^probe nbdkit\.[a-z_]* *= *process' "$tapset_in")"
n_sites="$(grep -c '^process(' "$tmpdir/p2" || :)"
echo "$0: stap -p2 resolved $n_aliases aliases to $n_sites probe sites"

# 2b. Every hierarchical alias, and the symbolic variables of the main
# ones (the conninfo tapset comes in with peer, export, transport).
if ! stap -p2 "${stap_r[@]}" -I "$tapset_dir" -e '
probe nbdkit.*.*, nbdkit.*.*.* ? { printf("%s %s\n", probe_name, argstr) }
probe nbdkit.request.start {
  printf("%s %s %s %s %s\n", cmd, flags_str, peer, export, transport) }
probe nbdkit.request.done {
  printf("%s %d %d %s %s %s %s\n", cmd, latency_ns, latency_us, errno_name,
         peer, export, transport) }
probe nbdkit.handshake.option { println(option_name) }
probe nbdkit.handshake.reply { println(option_name, reply_name) }
probe nbdkit.handshake.export { println(eflags_str) }
probe nbdkit.connection.close { println(peer, export, transport, tls) }
probe nbdkit.plugin.load { println(thread_model_name) }
probe nbdkit.layer.return { println(errno_name) }
probe nbdkit.connection.info ? { println(peer, export, transport) }
' > "$tmpdir/p2h" 2> "$tmpdir/p2h.err"; then
  filter < "$tmpdir/p2h.err"
  fail "stap -p2 of the hierarchical aliases failed"
fi
n_h="$(grep -c '^probe nbdkit\.[a-z_]*\.[a-z_]* *=' "$tapset_in")"
echo "$0: stap -p2 resolved $n_h hierarchical aliases"
# The conninfo view came with them: its globals are in the session.
grep -q '__nbdkit_ci_peer' "$tmpdir/p2h" || fail "conninfo tapset not used"

# 2c. Every argument of every probe, read raw.
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
timeout -k 120 120 stap -I "$tapset_dir" -x "$server_pid" -e '
probe begin { printf("READY\n") }
probe nbdkit.request_done { n[command] <<< bytes }
probe nbdkit.request.done { s[cmd, peer] <<< latency_us }
probe end { foreach (c in n) printf("command %d count %d bytes %d\n", c,
                                    @count(n[c]), @sum(n[c]))
            foreach ([c, p] in s) printf("cmd %s peer %s count %d\n", c, p,
                                         @count(s[c, p])) }
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
# The client connected after stap attached: its peer is known by name.
grep -q '^cmd read peer unix count 10$' "$tmpdir/out" || fail "named reads"
