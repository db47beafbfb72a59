#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Our bash completion (bash/nbdkit), loaded the way bash-completion
# loads it, completes what a user types: options from the server's
# --long-options, --filter= names, plugin names (the build tree's for
# its ./nbdkit), a plugin's and its filters' key= parameters from
# --help, after options that take an argument too.
source "$(dirname "$0")/functions.sh"
requires_cmd bash
bc=/usr/share/bash-completion/bash_completion
requires test -r "$bc"

# complete WORD... : the completions bash offers for the last word.
complete_words ()
{
  bash --norc -c '
    source "$1"; source "$2"; shift 2
    complete -p nbdkit | grep -q "_nbdkit" || exit 3
    COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
    COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}
    _nbdkit nbdkit "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
    printf "%s\n" "${COMPREPLY[@]}"
  ' _ "$bc" "$abs_top_srcdir/bash/nbdkit" "$@"
}
expect ()
{
  local want="$1"; shift
  local got
  got="$(complete_words "$@" | sort | tr '\n' ' ')"
  [ "$got" = "$want" ] ||
    fail "completing \`$*': got \`$got', want \`$want'"
}

nbdkit="$abs_top_builddir/nbdkit"
expect "--exit-with-parent " "$nbdkit" --exit-w
# bash-completion splits --filter=dela at `=': bash puts `delay' after it.
expect "delay " "$nbdkit" --filter=dela
expect "delay " "$nbdkit" --filter del
expect "memory " "$nbdkit" -f memor
expect "memory " "$nbdkit" -U /tmp/sock -P /tmp/pid memor
# The plugin's parameters, then a filter's before it.
expect "size= " "$nbdkit" memory si
expect "allocator= " "$nbdkit" -r memory all
expect "rdelay= " "$nbdkit" --filter=delay memory rde
expect "rdelay= " "$nbdkit" --filter delay -t 4 memory size=1M rde
# Arguments of options.
expect "off on require " "$nbdkit" --tls ""
expect "--read-only " "$nbdkit" -4 --read-o
# Every long option is offered.
n=$(complete_words "$nbdkit" -- | wc -l)
[ "$n" -ge 40 ] || fail "only $n options offered for --"
