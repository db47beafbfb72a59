#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A file the server may not open gets an error that says what to do:
# -r is suggested only when the file can be read; a file that cannot be
# read at all is described (its mode and owner, the server's uid), with
# and without -r, since -r would fail the same way; a read-only file
# system says so.  The client gets no export in every case.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo setpriv
[ "$(id -u)" -eq 0 ] || { echo "$0: needs root to drop its capabilities"; exit 77; }

dir="$tmpdir/d"
mkdir "$dir"
printf 'hello' > "$dir/disk"
# The server runs as root without the capabilities that bypass file
# permissions, so the mode of its own files applies to it as to any
# user, while the build tree (in a directory only root may enter, in
# CI's sanitizer build) stays within its reach.
nocaps=(setpriv --inh-caps=-dac_override,-dac_read_search
        --bounding-set=-dac_override,-dac_read_search)
as_restricted ()
{
  t "${nocaps[@]}" "$NBDKIT" "$@" -U - file "$dir/disk" \
    --run 'nbdinfo --size "$uri"' > "$tmpdir/out" 2>&1 && return 1
  cat "$tmpdir/out"
}

chmod 444 "$dir/disk"
as_restricted || fail "a read-only file was served read-write"
grep -q 'cannot open for writing: Permission denied (it can be read: use -r' \
  "$tmpdir/out" || fail "no -r hint for a readable file"
# ... and -r then works.
t "${nocaps[@]}" \
  "$NBDKIT" -r -U - file "$dir/disk" --run 'nbdinfo --size "$uri"' \
  > "$tmpdir/out" 2>&1 || { cat "$tmpdir/out"; fail "-r did not help"; }
[ "$(cat "$tmpdir/out")" = 5 ] || fail "wrong size with -r"

chmod 000 "$dir/disk"
as_restricted || fail "an unreadable file was served"
grep -q 'cannot open for reading or writing: Permission denied (the file is mode 0000, owned by uid 0 gid 0; the server runs as uid 0 gid 0): -r would not help' \
  "$tmpdir/out" || fail "the unreadable file's error is not explained"
grep -q 'use -r' "$tmpdir/out" && fail "-r suggested for an unreadable file"
as_restricted -r || fail "an unreadable file was served with -r"
grep -q 'cannot open for reading: Permission denied (the file is mode 0000' \
  "$tmpdir/out" || fail "the error with -r is not explained"

# A directory on the way that cannot be searched.
chmod 644 "$dir/disk"
chmod 600 "$dir"
as_restricted -r || fail "a file in an unsearchable directory was served"
grep -q 'a directory on the path is not searchable by uid 0' \
  "$tmpdir/out" || fail "the unsearchable directory is not named"
