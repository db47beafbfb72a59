#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Plugin parameters as nbdkit(1) defines them, with Debian's prebuilt
# plugins: keys and values live as long as the plugin (the eval plugin
# keeps pointers to them); a bare first parameter of a plugin without
# a magic config key is script=VALUE, so "nbdkit cc foo.c" and "nbdkit
# python foo.py" serve data, loaded by path and by short name.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh
eval_plugin="$debian_plugindir/nbdkit-eval-plugin.so"
requires test -r "$eval_plugin"

# read_back PLUGIN ARGS...: the first 8 bytes and the size, through
# nbdsh, with PLUGIN as a path (through ./nbdkit) or a short name
# (Debian's plugin directory).
read_back ()
{
  local plugin="$1"
  shift
  case "$plugin" in
    /*) t "$NBDKIT" -U - "$plugin" "$@" \
          --run 'nbdsh -u "$uri" -c "print(h.get_size(), bytes(h.pread(8, 0)))"' ;;
    *) NBDKIT_PLUGINDIR="$debian_plugindir" t "$server_binary" -U - \
          "$plugin" "$@" \
          --run 'nbdsh -u "$uri" -c "print(h.get_size(), bytes(h.pread(8, 0)))"' ;;
  esac
}

# eval: each method is its own key=value; the plugin keeps the key
# and value pointers.
for p in "$eval_plugin" eval; do
  out="$(read_back "$p" get_size='echo 1M' \
           pread='printf "%*s" $3 "" | tr " " e' \
           can_write='exit 3')"
  echo "$p: $out"
  [ "$out" = "1048576 b'eeeeeeee'" ] || fail "eval ($p) served: $out"
done

# cc: nbdkit cc foo.c, the C file compiled and loaded by the plugin.
cc_plugin="$debian_plugindir/nbdkit-cc-plugin.so"
if [ -r "$cc_plugin" ] && command -v cc >/dev/null; then
  cat > "$tmpdir/c.c" <<'C'
#include <stdint.h>
#include <string.h>
#define NBDKIT_API_VERSION 2
#include <nbdkit-plugin.h>
#define THREAD_MODEL NBDKIT_THREAD_MODEL_PARALLEL
static void *o (int ro) { return NBDKIT_HANDLE_NOT_NEEDED; }
static int64_t s (void *h) { return 65536; }
static int r (void *h, void *b, uint32_t n, uint64_t off, uint32_t f)
{ memset (b, 'c', n); return 0; }
static struct nbdkit_plugin plugin = {
  .name = "fromc", .open = o, .get_size = s, .pread = r,
};
NBDKIT_REGISTER_PLUGIN (plugin)
C
  for p in "$cc_plugin" cc; do
    out="$(read_back "$p" "$tmpdir/c.c" \
             EXTRA_CFLAGS="-I$abs_top_srcdir/include -I$abs_top_builddir/include")"
    echo "$p: $out"
    [ "$out" = "65536 b'cccccccc'" ] || fail "cc ($p) served: $out"
  done
else
  echo "no cc plugin or compiler: cc not checked"
fi

# python: nbdkit python foo.py (nbdkit-plugin-python, .ci/deps).
py_plugin="$debian_plugindir/nbdkit-python-plugin.so"
if [ -r "$py_plugin" ]; then
  cat > "$tmpdir/p.py" <<'PY'
import nbdkit
API_VERSION = 2
def open(readonly):
    return 1
def get_size(h):
    return 4096
def pread(h, buf, offset, flags):
    buf[:] = b"p" * len(buf)
PY
  for p in "$py_plugin" python; do
    out="$(read_back "$p" "$tmpdir/p.py")"
    echo "$p: $out"
    [ "$out" = "4096 b'pppppppp'" ] || fail "python ($p) served: $out"
  done
else
  fail "Debian's python plugin is missing (nbdkit-plugin-python, .ci/deps)"
fi

# Only the first bare parameter can be the script.
if "$NBDKIT" -U - "$eval_plugin" get_size='echo 1M' bare --run true \
     2> "$tmpdir/err"; then
  fail "a second bare parameter was accepted"
fi
grep -q 'must be key=value' "$tmpdir/err" || fail "no message for a bare value"
