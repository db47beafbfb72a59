#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# docs/nbdkit-hacking.pod, the design document, names files and
# functions of the tree: each must exist, so the page cannot drift
# from the code unseen.  Files: every F<...> with a folder in it (or a
# bare name, looked for in server/).  Functions: every C<name> shaped
# like one of ours (lower case with an underscore, or nbdkit_*), looked
# for as a word in the code.
source "$(dirname "$0")/functions.sh"
set -e

top=$abs_top_srcdir
pod=$top/docs/nbdkit-hacking.pod
test -f "$pod" || fail "no $pod"

# Made by the build, not kept in git.
generated='server/nbdkit server/probes.h probes.h'
# Prefixes (C<conn_>) end in _ and are not names.  Names of other
# projects that the page mentions on purpose:
foreign='nbd_connect_uri nbd_connect_unix nbd_pread nbd_aio_pread
  sd_notify h_pread'

missing=
files=$(grep -o 'F<[^>]*>' "$pod" | sed 's/^F<//; s/>$//' | sort -u)
nfiles=0
for f in $files; do
  case " $generated " in *" $f "*) continue ;; esac
  case $f in
    *'*'*|*NAME*|*WHAT*|*LANG*|*ASPECT*|*hello*|*.so|*.log|/*|*'$'*|.*) continue ;;
    */Makefile) continue ;;                     # made by configure
  esac
  nfiles=$((nfiles + 1))
  if [[ $f == */* ]]; then
    # Generated pages and tools are in the build tree.
    test -e "$top/$f" || test -e "$abs_top_builddir/$f" ||
      missing="$missing file:$f"
  else
    test -e "$top/server/$f" || test -e "$top/tools/$f" ||
      test -e "$top/$f" ||
      missing="$missing file:$f"
  fi
done

names=$(grep -o 'C<[a-z][a-z0-9_]*>' "$pod" | sed 's/^C<//; s/>$//' |
        grep '_' | grep -v '_$' | sort -u)
code_dirs="$top/server $top/include $top/common $top/plugins $top/filters
           $top/tools $top/tests"
nnames=0
for n in $names; do
  case " $(echo $foreign) " in *" $n "*) continue ;; esac
  nnames=$((nnames + 1))
  grep -rqw --include='*.[ch]' --include='*.d' --include='*.h.in' \
       --include='*.py' --include='*.sh' --include='*.bt' \
       -e "$n" $code_dirs || missing="$missing name:$n"
done

echo "checked $nfiles files and $nnames names"
test "$nfiles" -gt 30 || fail "too few files read from $pod: $nfiles"
test "$nnames" -gt 50 || fail "too few names read from $pod: $nnames"
test -z "$missing" ||
  fail "docs/nbdkit-hacking.pod names what is not in the tree:$missing"
