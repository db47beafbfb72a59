#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The cc plugin's failures: a compile error is one line from the plugin
# plus the compiler's own messages, exit 1; so is a compiler that does
# not exist.  A missing source file, a source that is not a plugin (no
# plugin_init), one built for API version 1, one without pread, and no
# source at all are each one clear line, exit 1.  Nothing is left in
# $TMPDIR afterwards.
source "$(dirname "$0")/functions.sh"
requires_cmd cc gcc
export TMPDIR="$tmpdir/tmp"
mkdir "$TMPDIR"

# run_fail WANT ARGS...: exit status 1, one "error:" line with WANT.
run_fail ()
{
  local want="$1" status=0
  shift
  t "$NBDKIT" -U - cc "$@" --run true > "$tmpdir/res" 2>&1 || status=$?
  cat "$tmpdir/res"
  [ "$status" -eq 1 ] || fail "cc $*: exit status $status, not 1"
  [ "$(grep -c 'nbdkit: cc: error:' "$tmpdir/res")" -eq 1 ] ||
    fail "cc $*: not one error line"
  grep -q 'nbdkit: cc: error:.*'"$want" "$tmpdir/res" ||
    fail "cc $*: no '$want' in the error line"
}

printf '#include <nbdkit-plugin.h>\nint x = ;\n' > "$tmpdir/bad.c"
run_fail "compiling $tmpdir/bad.c failed" "$tmpdir/bad.c"
grep -q "bad.c:2:.*error:" "$tmpdir/res" || fail "no compiler message"

src="$abs_top_srcdir/plugins/cc/test-cc-disk.c"
run_fail "no-such-compiler exited with status 127" "$src" CC=no-such-compiler

run_fail "missing.c: No such file" "$tmpdir/missing.c"

printf 'int f (void) { return 1; }\n' > "$tmpdir/notplugin.c"
run_fail "no plugin_init" "$tmpdir/notplugin.c"

cat > "$tmpdir/v1.c" <<'C'
#include <nbdkit-plugin.h>
#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL
static void *o (int r) { return NBDKIT_HANDLE_NOT_NEEDED; }
static int64_t s (void *h) { return 512; }
static int p (void *h, void *b, uint32_t c, uint64_t off) { return 0; }
static struct nbdkit_plugin plugin = {
  .name = "v1", .open = o, .get_size = s, .pread = p,
};
NBDKIT_REGISTER_PLUGIN (plugin)
C
run_fail "NBDKIT_API_VERSION 2" "$tmpdir/v1.c"

cat > "$tmpdir/nopread.c" <<'C'
#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL
static void *o (int r) { return NBDKIT_HANDLE_NOT_NEEDED; }
static int64_t s (void *h) { return 512; }
static struct nbdkit_plugin plugin = { .name = "np", .open = o, .get_size = s };
NBDKIT_REGISTER_PLUGIN (plugin)
C
run_fail "must have open, get_size and pread" "$tmpdir/nopread.c"

run_fail "missing the source" 

leftover="$(ls -A "$TMPDIR")"
[ -z "$leftover" ] || fail "left in \$TMPDIR: $leftover"
