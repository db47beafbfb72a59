#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# -e EXPORTNAME: --run sees it as $exportname and in $uri, clients can
# connect to it, and NBD_OPT_LIST answers with one export.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

export OUT="$tmpdir/x"
t "$NBDKIT" -U - -e myexport memory 1M --run '
  set -e
  echo "exportname=$exportname uri=$uri"
  [ "$exportname" = myexport ] || exit 10
  case "$uri" in nbd+unix:///myexport\?socket=*) ;; *) exit 11 ;; esac
  nbdinfo "$uri" > "$OUT.info" 2>&1 || exit 12
  nbdinfo --list --json "$uri" > "$OUT.list" 2>&1 || exit 13
'
cat "$tmpdir/x.info" "$tmpdir/x.list"
grep -Fq 'export="myexport"' "$tmpdir/x.info" || fail "not connected to myexport"
n="$(grep -c '"export-name"' "$tmpdir/x.list")"
[ "$n" -eq 1 ] || fail "NBD_OPT_LIST returned $n exports, expected 1"
