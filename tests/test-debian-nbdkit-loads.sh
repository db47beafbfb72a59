#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Our plugins load and serve in Debian's nbdkit 1.32, which lacks this
# server's additions to the plugin interface (nbdkit_connection_id,
# nbdkit_request_cookie, nbdkit_probe, nbdkit_disconnect, the metric
# counters, the async calls ...): <nbdkit-common.h> refers to them
# weakly, with fallbacks.
#  - file, curl (file:// URL), nbd (proxying our memory server), sh,
#    eval and python (each firing nbdkit_probe) serve known bytes under
#    /usr/bin/nbdkit; no plugin of ours refers to a missing symbol
#    other than weakly (nm);
#  - a tiny plugin compiled here, as an author would, with -O2 -flto
#    -fvisibility=hidden (gcc, and clang if present), reads back its
#    connection id and cookie: 0 and 0 under Debian's server, real
#    ones under ours; its nbdkit_parse_delay fails with the header's
#    error under Debian's and works under ours; its metric counter
#    (nbdkit_metric_counter, _add) is skipped under Debian's and counts
#    its reads on our --metrics page (a bad name is refused there);
#  - the same source with -DNBDKIT_REQUIRE_EXTENSIONS does not load in
#    Debian's server ("undefined symbol"), as every plugin did before.
# That our server still gives these plugins real ids in their probes
# is what test-{python,curl,nbd}-probes.sh, test-sh-plugin-user-probe.sh
# and test-example-plugin-probes.sh check.
source "$(dirname "$0")/functions.sh"
deb=/usr/bin/nbdkit
requires_cmd "$deb" nbdsh nbdcopy nm gcc cmp
# Our .so files are built with the sanitizers there: Debian's nbdkit
# is not, and cannot load them (the ASan runtime must come first).
skip_under_sanitizers "Debian's nbdkit cannot load instrumented plugins"

b="$abs_top_builddir"
so () { echo "$b/plugins/$1/.libs/nbdkit-$1-plugin.so"; }
cd "$tmpdir"

# Every nbdkit_* symbol a plugin refers to strongly is one Debian's
# server exports.
nm -D --defined-only "$deb" | awk '{ print $3 }' | sort > deb.syms
for f in "$b"/plugins/*/.libs/nbdkit-*-plugin.so; do
  nm -D --undefined-only "$f" | awk '$1 == "U" && $2 ~ /^nbdkit_/ { print $2 }' |
    sort | comm -23 - deb.syms > missing
  [ ! -s missing ] || fail "$f refers to $(tr '\n' ' ' < missing)strongly"
done

head -c 300000 /dev/urandom > disk.img
for p in file curl; do
  arg=disk.img
  [ $p = file ] || arg="file://$tmpdir/disk.img"
  t "$deb" -U - "$(so $p)" "$arg" \
    --run "nbdcopy \"\$uri\" $p.out" || fail "$p under Debian's nbdkit"
  cmp disk.img $p.out || fail "$p under Debian's nbdkit: bytes differ"
done

start_server memory 1M
t "$deb" -U - "$(so nbd)" socket="$sock" --run 'nbdsh -u "$uri" -c "
h.pwrite(b\"nbd-proxied\" * 10, 4096)
assert h.pread(110, 4096) == b\"nbd-proxied\" * 10
"' || fail "nbd plugin under Debian's nbdkit"
stop_server

# The scripts fire the generic probe in every read: skipped there.
cat > s.sh <<'EOF'
#!/bin/sh
case "$1" in
  get_size) echo 64k ;;
  pread) nbdkit-probe s_read "$3" "$4" x || exit 1
         head -c "$3" /dev/zero | tr '\0' S ;;
  *) exit 2 ;;
esac
EOF
chmod +x s.sh
cat > p.py <<'EOF'
import nbdkit
API_VERSION = 2
def open(readonly):
    return 1
def get_size(h):
    return 65536
def pread(h, buf, offset, flags):
    nbdkit.probe("py_read", offset, len(buf), None)
    buf[:] = b"P" * len(buf)
EOF
reads_as ()
{
  local c=$1; shift
  t "$@" --run "nbdsh -u \"\$uri\" -c 'assert h.pread(512, 4096) == b\"$c\" * 512'"
}
reads_as S "$deb" -U - "$(so sh)" ./s.sh ||
  fail "sh plugin under Debian's nbdkit"
reads_as E "$deb" -U - "$(so eval)" get_size='echo 64k' \
  pread='nbdkit-probe e_read "$3" "$4" && head -c "$3" /dev/zero | tr "\0" E' ||
  fail "eval plugin under Debian's nbdkit"
reads_as P "$deb" -U - "$(so python)" p.py ||
  fail "python plugin under Debian's nbdkit"

# An author's plugin: all three calls, built as the docs say.
cat > ids.c <<'EOF'
#include <stdint.h>
#include <string.h>
#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>

#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL

static const char *metric_name = "reads";
static struct nbdkit_metric *reads;

static int
ids_config (const char *key, const char *value)
{
  unsigned sec, nsec;
  if (strcmp (key, "metric") == 0) {
    metric_name = value;
    return 0;
  }
  if (strcmp (key, "delay") != 0) {
    nbdkit_error ("unknown parameter %s", key);
    return -1;
  }
  return nbdkit_parse_delay ("delay", value, &sec, &nsec);
}

/* NULL without --metrics or in a server without counters. */
static int
ids_get_ready (void)
{
  reads = nbdkit_metric_counter (metric_name, "Reads.", "kind");
  return 0;
}

static void *
ids_open (int readonly)
{
  nbdkit_probe ("ids_open", readonly, 0, NULL);
  return NBDKIT_HANDLE_NOT_NEEDED;
}

static int64_t
ids_get_size (void *handle)
{
  return 4096;
}

/* Reads return the connection id and the cookie, then 0xa5s. */
static int
ids_pread (void *handle, void *buf, uint32_t count, uint64_t offset,
           uint32_t flags)
{
  uint64_t ids[2] = { nbdkit_connection_id (), nbdkit_request_cookie () };
  nbdkit_probe ("ids_read", (int64_t) offset, count, "ids");
  nbdkit_metric_add (reads, "ids", 1);
  memset (buf, 0xa5, count);
  memcpy (buf, ids, count < sizeof ids ? count : sizeof ids);
  return 0;
}

static struct nbdkit_plugin plugin = {
  .name = "ids",
  .config = ids_config,
  .get_ready = ids_get_ready,
  .open = ids_open,
  .get_size = ids_get_size,
  .pread = ids_pread,
};
NBDKIT_REGISTER_PLUGIN (plugin)
EOF
cflags="-I$abs_top_srcdir/include -I$b/include -fPIC -shared -Wall -Wextra
  -Wno-unused-parameter -Werror"
ccs=gcc
! command -v clang > /dev/null || ccs="gcc clang"
for cc in $ccs; do
  $cc $cflags -O2 -flto -fvisibility=hidden ids.c -o ids-$cc.so ||
    fail "$cc could not build the plugin"
done
gcc $cflags -DNBDKIT_REQUIRE_EXTENSIONS ids.c -o ids-strong.so ||
  fail "gcc -DNBDKIT_REQUIRE_EXTENSIONS could not build the plugin"

# "ID COOKIE REST-IS-A5" of one read of 64 bytes.
read_ids='
import struct
d = h.pread(64, 0)
i, c = struct.unpack("=QQ", d[:16])
print(i, c, d[16:] == b"\xa5" * 48)
'
export read_ids
for cc in $ccs; do
  out="$(t "$deb" -U - "$tmpdir/ids-$cc.so" \
           --run 'nbdsh -u "$uri" -c "$read_ids"')" ||
    fail "ids-$cc.so under Debian's nbdkit"
  [ "$out" = "0 0 True" ] || fail "ids-$cc.so under Debian's: '$out'"
  out="$(t "$NBDKIT" -U - "$tmpdir/ids-$cc.so" \
           --run 'nbdsh -u "$uri" -c "$read_ids"')" ||
    fail "ids-$cc.so under our nbdkit"
  set -- $out
  [ "$#" -eq 3 ] && [ "$1" -gt 0 ] && [ "$2" -gt 0 ] && [ "$3" = True ] ||
    fail "ids-$cc.so under ours: '$out' (expected real ids)"
done

# The counter on our page: two reads of export "" by the ids plugin.
t "$NBDKIT" -U - --metrics=unix:"$tmpdir/m" "$tmpdir/ids-gcc.so" \
  --run "nbdsh -u \"\$uri\" -c 'h.pread(8, 0); h.pread(8, 8)' &&
         curl -sS --unix-socket $tmpdir/m http://localhost/metrics" \
  > page || fail "ids-gcc.so with --metrics"
grep -Fxq 'nbdkit_ids_reads_total{export="",kind="ids"} 2' page ||
  { grep ids page; fail "the ids plugin's reads are not on the page"; }
t "$NBDKIT" -U - --metrics=unix:"$tmpdir/m" "$tmpdir/ids-gcc.so" \
  metric=Bad-Name --run true 2> bad.err || fail "a bad name stopped the server"
grep -q 'nbdkit_metric_counter: bad name "Bad-Name"' bad.err ||
  { cat bad.err; fail "no error for a bad counter name"; }

# The fallback of a call that answers: an error, and config fails.
t "$NBDKIT" -U - "$tmpdir/ids-gcc.so" delay=20ms --run true ||
  fail "delay=20ms refused by our nbdkit"
expect_fail t "$deb" -U - "$tmpdir/ids-gcc.so" delay=20ms --run true \
  2> delay.err || fail "Debian's nbdkit ran nbdkit_parse_delay"
grep -q 'nbdkit_parse_delay: not in this nbdkit server' delay.err ||
  { cat delay.err; fail "no fallback error for nbdkit_parse_delay"; }

# Strong references: loads in ours, not in Debian's.
t "$NBDKIT" -U - "$tmpdir/ids-strong.so" --run 'nbdsh -u "$uri" -c "$read_ids"' \
  > /dev/null || fail "ids-strong.so under our nbdkit"
expect_fail t "$deb" -U - "$tmpdir/ids-strong.so" --run true 2> strong.err ||
  fail "Debian's nbdkit loaded a plugin with strong references"
grep -q 'undefined symbol: nbdkit_' strong.err ||
  { cat strong.err; fail "ids-strong.so failed for another reason"; }
echo "OK: our plugins load and serve in Debian's nbdkit"
