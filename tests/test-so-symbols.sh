#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Every plugin and filter .so built here exports only what the server
# looks up by name (plugins/plugins.syms, filters/filters.syms): the
# init function, debug flags (NAME_debug_*), and for plugins the
# zero-copy and asynchronous extensions.  Anything else (a helper such
# as sparse_read) could shadow, or be shadowed by, a symbol of another object.
source "$(dirname "$0")/functions.sh"
requires_cmd nm

n=0
for so in "$abs_top_builddir"/plugins/*/.libs/nbdkit-*-plugin.so \
          "$abs_top_builddir"/filters/*/.libs/nbdkit-*-filter.so; do
  [ -f "$so" ] || continue
  # Debug flags are named as the user types them after -D, so in upper
  # case for the S3 plugin (S3_debug_verbose) and the data plugin's
  # data.AST flag (data_debug_AST), as in nbdkit.
  # AddressSanitizer adds an __odr_asan marker beside each exported
  # global (the debug flags) in a sanitizer build.
  case "$so" in
    *-plugin.so) allowed='^(plugin_init|nbdkit_zerocopy_ops|nbdkit_async_ops|[A-Za-z0-9_]+_debug_[A-Za-z0-9_]+|__odr_asan[._].*)$'
                 init=plugin_init ;;
    *) allowed='^(filter_init|nbdkit_async_filter_ops|[a-z0-9_]+_debug_[A-Za-z0-9_]+|__odr_asan[._].*)$'
       init=filter_init ;;
  esac
  nm -D --defined-only "$so" | awk '{ print $NF }' > "$tmpdir/syms"
  grep -qx "$init" "$tmpdir/syms" || fail "$so does not export $init"
  if grep -Ev "$allowed" "$tmpdir/syms" > "$tmpdir/extra"; then
    cat "$tmpdir/extra"
    fail "$so exports symbols it should keep private (above)"
  fi
  echo "$(basename "$so"): $(tr '\n' ' ' < "$tmpdir/syms")"
  n=$(( n + 1 ))
done
[ "$n" -ge 5 ] || fail "found only $n plugin and filter .so files"
