#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The sh and eval plugins' $tmpdir is the scripts' alone: a --run
# command does not see it (and sees a tmpdir the server inherited,
# unchanged), as with nbdkit, while every script run sees the plugin's
# directory.  Debian's nbdkit runs the same commands.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

cat > "$tmpdir/s.sh" <<'SH'
#!/bin/sh
case "$1" in
  get_size)
    # The plugin's own directory, even when the server inherited one.
    if [ -d "$tmpdir" ] && [ "$tmpdir" != /inherited ]; then echo 1M
    else echo 0; fi ;;
  pread) dd if=/dev/zero count=$3 iflag=count_bytes 2>/dev/null ;;
  *) exit 2 ;;
esac
SH
chmod +x "$tmpdir/s.sh"
servers=("$NBDKIT")
[ -x /usr/bin/nbdkit ] && servers+=(/usr/bin/nbdkit)

run='echo "tmpdir=${tmpdir-unset}"; env | grep "^tmpdir=" || :
  nbdinfo --size "$uri"'
for server in "${servers[@]}"; do
  out="$(env -u tmpdir "$server" -U - sh "$tmpdir/s.sh" --run "$run" |
         tr '\n' ' ')"
  [ "$out" = "tmpdir=unset 1048576 " ] ||
    fail "$server sh: the --run command saw '$out'"
  out="$(env -u tmpdir "$server" -U - eval \
           get_size='[ -d "$tmpdir" ] && echo 1M' \
           pread='exit 1' --run "$run" | tr '\n' ' ')"
  [ "$out" = "tmpdir=unset 1048576 " ] ||
    fail "$server eval: the --run command saw '$out'"
  # Inherited: unchanged for the command, the plugin's for the script.
  out="$(tmpdir=/inherited "$server" -U - sh "$tmpdir/s.sh" --run "$run" |
         tr '\n' ' ')"
  [ "$out" = "tmpdir=/inherited tmpdir=/inherited 1048576 " ] ||
    fail "$server sh: with tmpdir inherited, the --run command saw '$out'"
done
