#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The server binary carries a .note.stapsdt entry, provider nbdkit, for
# every probe declared in server/probes.d, and none that is not declared.
source "$(dirname "$0")/functions.sh"
requires_cmd readelf
requires_probes

probes_d="$abs_top_srcdir/server/probes.d"
readelf -n "$server_binary" > "$tmpdir/notes"
awk '/Provider:/ { p = $2 } /Name:/ { print p ":" $2 }' "$tmpdir/notes" |
  sort -u > "$tmpdir/in-binary"
sed -n 's/^[[:space:]]*probe[[:space:]]\{1,\}\([a-z_0-9]*\).*/nbdkit:\1/p' \
  "$probes_d" | sort -u > "$tmpdir/declared"
# A build without GnuTLS has no TLS code, hence no TLS probe sites.
if [ "$("$NBDKIT" --dump-config | grep '^tls=')" = tls=no ]; then
  grep -v '^nbdkit:tls_' "$tmpdir/declared" > "$tmpdir/declared.new"
  mv "$tmpdir/declared.new" "$tmpdir/declared"
fi
echo "in the binary:"; cat "$tmpdir/in-binary"

for p in connection_accept handshake_option handshake_done request_start \
         request_done connection_close; do
  grep -qx "nbdkit:$p" "$tmpdir/in-binary" || fail "no stapsdt note for $p"
done
# Every declared probe is compiled in somewhere, and nothing else is.
diff -u "$tmpdir/declared" "$tmpdir/in-binary" ||
  fail "probes.d and the binary's .note.stapsdt differ"

# Every argument at every site must be readable by every tracer: no
# thread-local (%fs- or %gs-relative) operands, and no literal
# immediates ($5), which perf drops at one site and not another and
# then refuses the probe.  check_operands FILE reads `readelf -n'
# output and prints each nbdkit note whose Arguments line has such an
# operand (or is not SIZE@OPERAND ...); it fails if it found one, or if
# it saw a note of provider nbdkit without an Arguments line (readelf's
# layout changed: the check would look at nothing).
check_operands ()
{
  awk '
    match($0, /Provider: [^ \t]+/) {
      if (inside) { print "no Arguments line for " name; bad = 1 }
      p = substr($0, RSTART + 10, RLENGTH - 10); inside = (p == "nbdkit")
      if (inside) notes++
      next
    }
    inside && /Name:/ { name = $2; next }
    inside && /Arguments:/ {
      inside = 0; checked++
      for (i = 2; i <= NF; i++)
        if ($i !~ /^-?[0-9]+@[^$]+$/ || $i ~ /%[fg]s:/) {
          print name ": " $i; bad = 1
        }
    }
    END {
      if (inside) { print "no Arguments line for " name; bad = 1 }
      printf "%d nbdkit notes, %d Arguments lines checked\n", notes, checked
      exit bad || notes == 0 || notes != checked
    }' "$1"
}
check_operands "$tmpdir/notes" ||
  fail "some probe arguments are not in registers or memory (see above)"

# The check can fail: an object with a literal operand (gcc's default
# constraints turn the constant 5 into -4@$5) must be refused.
cc="$(sed -n 's/^CC = //p' "$abs_top_builddir/Makefile")"
cat > "$tmpdir/literal.c" <<'EOF'
#include <sys/sdt.h>
void f (void) { STAP_PROBE1 (nbdkit, x, 5); }
EOF
${cc:-cc} -O2 -c "$tmpdir/literal.c" -o "$tmpdir/literal.o" ||
  fail "could not compile the literal-operand object"
readelf -n "$tmpdir/literal.o" > "$tmpdir/literal-notes"
cat "$tmpdir/literal-notes"
grep -q 'Arguments: -\?[0-9]@\$5$' "$tmpdir/literal-notes" ||
  fail "the test object has no literal operand to reject"
if check_operands "$tmpdir/literal-notes"; then
  fail "check_operands accepted a literal operand"
fi
