#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Every tracer command in the pages, the README and the tools' headers
# watches one server: bpftrace with -p or -c (or -l, which only lists),
# perf record without -a, stap with -x or -c, dtrace with -p or -c.  A
# command that names the binary without them also counts every other
# server run from it (on a busy machine the counts doubled).  Allowed
# on purpose, as their pages explain: probes that fire before there is
# a pid to name (config and plugin_unload in nbdkit-tracing(1),
# floppy_build).  tests/test-tracing-examples.sh runs the marked
# examples beside a second server.
source "$(dirname "$0")/functions.sh"

cd "$abs_top_srcdir"
files=(README.md docs/*.pod.in plugins/*/*.pod filters/*/*.pod
       tools/*.bt tools/nbdkit.d tools/nbdkit.stp.in)
for f in docs/*.pod; do
  [ -e "$f.in" ] || files+=("$f")      # not the generated copies
done
# Lines that run a tracer: the command (indented, or after the "# " of
# a root prompt or the " * " of a comment), then an option.
tracer='^[[:space:]]*([#*][[:space:]]+)*([A-Z_]+=[^ ]+ )?(bpftrace|perf record|stap|dtrace) -'
scoped='bpftrace( [^ ]+)* -[pcl] |perf record|stap( [^ ]+)* -[xc] |dtrace( [^ ]+)* -[pc] '
grep -HnE "$tracer" "${files[@]}" > "$tmpdir/all" || :
[ -s "$tmpdir/all" ] || fail "no tracer commands found"
: > "$tmpdir/bad"
while IFS=: read -r f n line; do
  case "$line" in
    *"perf record"*)
      ! grep -qE 'perf record.* (-a[A-Za-z]*|--all-cpus)( |$)' <<< "$line" ||
        echo "$f:$n:$line" >> "$tmpdir/bad"
      continue ;;
  esac
  grep -qE "$scoped" <<< "$line" && continue
  # The start-up probes, on this line or the next.
  sed -n "${n}p;$((n + 1))p" "$f" | grep -qE 'nbdkit:(config|floppy_build) ' &&
    continue
  echo "$f:$n:$line" >> "$tmpdir/bad"
done < "$tmpdir/all"
if [ -s "$tmpdir/bad" ]; then
  cat "$tmpdir/bad"
  fail "the tracer commands above watch every server of the binary"
fi
echo "$0: $(wc -l < "$tmpdir/all") tracer commands, each on one server"
