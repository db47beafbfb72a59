#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --long-options and --short-options list every option, one per line,
# at least those of Debian's nbdkit 1.32; Debian's bash completion
# script (which calls both, and PLUGIN --help) completes against ours.
source "$(dirname "$0")/functions.sh"
completion=/usr/share/bash-completion/completions/nbdkit
requires test -r "$completion"
requires test -r /usr/share/bash-completion/bash_completion

t "$NBDKIT" --long-options > "$tmpdir/long"
t "$NBDKIT" --short-options > "$tmpdir/short"
grep -Ev '^--[a-z0-9-]+$' "$tmpdir/long" && fail "odd --long-options line"
grep -Ev '^-[A-Za-z0-9]$' "$tmpdir/short" && fail "odd --short-options line"
for kind in long short; do
  /usr/bin/nbdkit --$kind-options | sort > "$tmpdir/debian.$kind"
  sort "$tmpdir/$kind" > "$tmpdir/our.$kind"
  missing="$(comm -23 "$tmpdir/debian.$kind" "$tmpdir/our.$kind")"
  [ -z "$missing" ] || fail "--$kind-options lacks: $missing"
done

# The completion runs "nbdkit" from $PATH: the build tree's wrapper is
# first there (functions.sh).  complete WORD...: the candidates bash
# offers for the last word of "nbdkit WORD...".
[ "$(command -v nbdkit)" = "$abs_top_builddir/nbdkit" ] ||
  fail "nbdkit on \$PATH is not the build tree's"
complete_words ()
{
  bash -c '
    source /usr/share/bash-completion/bash_completion
    source "$0"
    COMP_WORDS=(nbdkit "$@")
    COMP_CWORD=$(( ${#COMP_WORDS[@]} - 1 ))
    COMP_LINE="${COMP_WORDS[*]}"
    COMP_POINT=${#COMP_LINE}
    _nbdkit nbdkit "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf "%s\n" "${COMPREPLY[@]}"
  ' "$completion" "$@"
}

complete_words --mask > "$tmpdir/c1"
cat "$tmpdir/c1"
grep -qx -- --mask-handshake "$tmpdir/c1" || fail "--mask did not complete"
complete_words --ipv > "$tmpdir/c2"
[ "$(sort "$tmpdir/c2" | tr '\n' ' ')" = "--ipv4-only --ipv6-only " ] ||
  fail "--ipv completed to: $(cat "$tmpdir/c2")"
complete_words -U - - > "$tmpdir/c3"
grep -qx -- -U "$tmpdir/c3" && grep -qx -- --vsock "$tmpdir/c3" ||
  fail "- did not complete to the short and long options"
# A plugin's parameters, from "nbdkit PLUGIN --help".
complete_words file di > "$tmpdir/c4"
cat "$tmpdir/c4"
grep -qx 'dir=' "$tmpdir/c4" || fail "file di did not complete to dir="
# The options of nbdkit 1.36 to 1.46 are listed and complete too.
for o in --keepalive --name --no-mc --no-meta-contexts --timeout; do
  grep -qx -- "$o" "$tmpdir/long" || fail "--long-options lacks $o"
done
complete_words --keep > "$tmpdir/c5"
[ "$(cat "$tmpdir/c5")" = --keepalive ] || fail "--keep completed to: $(cat "$tmpdir/c5")"
