#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The example3 plugin: a private writable disk per connection, 100M by
# default.  Same flags, bytes and write results under Debian's nbdkit
# (with its example3 where it has one); writes do not leak between connections; the temporary
# files go to $TMPDIR and are gone; a bad size is one error line.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo nbdcopy
source "$srcdir/debian-filters.sh"

mkdir "$tmpdir/tmp"
export TMPDIR="$tmpdir/tmp"

# Debian's nbdkit 1.32.5 package ships no example plugins: where it has
# none, both servers load ours by path, which still compares what each
# server makes of the same plugin.
ex3=example3
[ -f "$debian_plugindir/nbdkit-example3-plugin.so" ] ||
  ex3="$abs_top_builddir/plugins/example3/.libs/nbdkit-example3-plugin.so"
compare "example3" read "$ex3" size=1M
compare "example3-write" write "$ex3" size=1M
compare "example3-default" read "$ex3"

t "$NBDKIT" -U - example3 size=2M --run 'export uri; nbdsh -u "$uri" -c -' <<'PY'
import os, nbd as nbdmod
assert h.get_size() == 2 * 1024 * 1024
assert not h.is_read_only()
assert h.can_flush()
# Exactly one temporary file exists, and it is already unlinked.
assert os.listdir(os.environ["TMPDIR"]) == []
h.pwrite(b"hello" * 1000, 1000)
h.pwrite(b"end", h.get_size() - 3, nbd.CMD_FLAG_FUA)
h.flush()
assert h.pread(5000, 1000) == b"hello" * 1000
assert h.pread(3, h.get_size() - 3) == b"end"
# A second connection gets a fresh disk.
h2 = nbdmod.NBD()
h2.connect_uri(os.environ["uri"])
assert h2.pread(5000, 1000) == bytes(5000)
h2.shutdown()
PY
[ -z "$(ls -A "$tmpdir/tmp")" ] || fail "temporary files left: $(ls "$tmpdir/tmp")"

# Parallel writes from several connections and many requests in flight.
t "$NBDKIT" -U - example3 size=8M --run '
  nbdcopy --connections=4 --requests=16 "$uri" "$uri"
  nbdinfo --size "$uri"' > "$tmpdir/size"
[ "$(cat "$tmpdir/size")" = 8388608 ] || fail "size $(cat "$tmpdir/size")"

# Bad parameters: one line naming the key, exit status 1.
for args in size=foo size=-1 foo=bar; do
  key="${args%%=*}"
  status=0
  "$NBDKIT" -U - example3 "$args" --run true 2> "$tmpdir/err" || status=$?
  [ "$status" = 1 ] && [ "$(wc -l < "$tmpdir/err")" = 1 ] &&
    grep -q "example3.*$key" "$tmpdir/err" ||
    fail "example3 $args: status $status: $(cat "$tmpdir/err")"
done

finish
