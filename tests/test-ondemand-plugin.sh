#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The ondemand plugin: an export name is a file in dir=, made by mkfs
# (or command=) the first time a client asks for it and kept after;
# the empty name is "default"; a name in use is locked (refused, or
# waited for with wait=true; shared by read-only clients); bad names
# and a failing command are refused and leave nothing behind; bad
# parameters exit 1 with one line.  A deterministic command gives the
# same bytes and flags as Debian's nbdkit.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo nbdcopy mke2fs dumpe2fs truncate
source "$srcdir/debian-filters.sh"
requires test -f "$debian_plugindir/nbdkit-ondemand-plugin.so"

d="$tmpdir/exports"
mkdir "$d"
blank='truncate -s $size "$disk"'

# --- The default: mkfs ------------------------------------------------------
t "$NBDKIT" -U - ondemand dir="$d" 32M label=ONDEMAND \
  --run 'nbdcopy "nbd+unix:///fs1?socket=$unixsocket" '"$tmpdir/fs1.img" ||
  fail "copying export fs1 failed"
[ "$(stat -c %s "$d/fs1")" -eq $((32 << 20)) ] || fail "$d/fs1 is not 32M"
cmp -s "$d/fs1" "$tmpdir/fs1.img" || fail "export fs1 differs from its file"
dumpe2fs -h "$d/fs1" 2>/dev/null > "$tmpdir/fs1.info" ||
  fail "export fs1 holds no ext2/3/4 filesystem"
grep -Eq '^Filesystem volume name: +ONDEMAND$' "$tmpdir/fs1.info" ||
  fail "label=ONDEMAND not set"
grep -Eq '^Filesystem features:.*has_journal.*extent' "$tmpdir/fs1.info" ||
  fail "the default type is not ext4"

# --- Persistence, names, listing -------------------------------------------
mkdir "$d/subdir"
start_server ondemand dir="$d" 1M command="$blank"
t nbdsh -c - <<PY
def conn(name):
    h = nbd.NBD()
    h.set_export_name(name)
    h.connect_unix("$sock")
    return h
a = conn("alpha")
a.pwrite(b"kept", 4096)
a.flush()
a.shutdown()
a = conn("alpha")
assert a.pread(4, 4096) == b"kept", "export alpha lost its data"
a.shutdown()
x = conn("")
x.pwrite(b"dflt", 0)
x.shutdown()
x = conn("default")
assert x.pread(4, 0) == b"dflt", "the empty name is not 'default'"
x.shutdown()
for bad in ["a.b", "x:y", "..", ".hidden", "a/b", "n" * 256]:
    try:
        conn(bad).shutdown()
        raise Exception("export name %r was accepted" % bad)
    except nbd.Error:
        pass
PY
t nbdinfo --list --json "$uri" |
  /usr/bin/python3 -c '
import json, sys
print(" ".join(sorted(e["export-name"] for e in json.load(sys.stdin)["exports"])))' \
  > "$tmpdir/list"
# The server lists "", which nbdinfo shows under its canonical name
# (test-ondemand-exports.sh checks the list itself).
[ "$(cat "$tmpdir/list")" = "alpha default fs1" ] ||
  fail "export list is '$(cat "$tmpdir/list")', not 'alpha default fs1'"
[ "$(ls -A "$d" | sort | tr '\n' ' ')" = "alpha default fs1 subdir " ] ||
  fail "unexpected files in the directory: $(ls -A "$d")"

# --- Locking ---------------------------------------------------------------
t nbdsh -c - <<PY
def conn(name):
    h = nbd.NBD()
    h.set_export_name(name)
    h.connect_unix("$sock")
    return h
a = conn("alpha")
try:
    conn("alpha").shutdown()
    raise Exception("two clients got export alpha at once")
except nbd.Error:
    pass
# Another export is not locked, and the lock goes with the client.
conn("beta").shutdown()
a.shutdown()
conn("alpha").shutdown()
PY
stop_server

start_server ondemand dir="$d" 1M wait=true command="$blank"
t nbdsh -c - <<PY
import subprocess, time
h = nbd.NBD()
h.set_export_name("alpha")
h.connect_unix("$sock")
p = subprocess.Popen(["nbdinfo", "--size",
                      "nbd+unix:///alpha?socket=$sock"],
                     stdout=subprocess.PIPE)
time.sleep(1.5)
assert p.poll() is None, "wait=true: the second client did not wait"
h.shutdown()
out, _ = p.communicate(timeout=30)
assert p.returncode == 0 and out.strip() == b"1048576", (p.returncode, out)
PY
stop_server

# Read-only clients share an export.
start_server -r ondemand dir="$d" 1M command="$blank"
t nbdsh -c - <<PY
hs = []
for i in range(3):
    h = nbd.NBD()
    h.set_export_name("alpha")
    h.connect_unix("$sock")
    assert h.pread(4, 4096) == b"kept"
    hs.append(h)
PY
stop_server

# --- A failing command: the client is refused, nothing is left -------------
rm -rf "$d"/*
start_server ondemand dir="$d" 1M command='truncate -s 1 "$disk"; exit 5'
expect_fail t nbdinfo "nbd+unix:///broken?socket=$sock" 2>/dev/null ||
  fail "a client connected although the command failed"
start_server ondemand dir="$d" 1M command='echo "no disk made" >&2'
expect_fail t nbdinfo "nbd+unix:///nodisk?socket=$sock" 2>/dev/null ||
  fail "a client connected although the command made no disk"
stop_server
[ -z "$(ls -A "$d")" ] || fail "a failed creation left: $(ls -A "$d")"

# --- Same command, same bytes and flags as Debian's nbdkit -----------------
# Each run starts from an empty directory (the probe empties it after).
# Debian's ondemand reports no holes; ours does, checked after.
cmd='truncate -s $size "$disk"
printf "hello" | dd of="$disk" bs=1 seek=65536 conv=notrunc status=none'
cat > "$tmpdir/probe" <<SH
#!/bin/sh
set -e
nbdinfo --json "\$1" | /usr/bin/python3 $probedir/flags.py
echo "copy \$(nbdcopy "\$1" - | sha256sum)"
echo "copy-all \$(nbdcopy --no-extents "\$1" - | sha256sum)"
ls "$d"
rm -f "$d"/*
SH
chmod +x "$tmpdir/probe"
compare "ondemand command" "$tmpdir/probe" ondemand dir="$d" 1M command="$cmd"
compare "ondemand command ro" "$tmpdir/probe" -r ondemand dir="$d" 1M \
  command="$cmd"
t "$NBDKIT" -U - ondemand dir="$d" 1M command="$cmd" \
  --run 'nbdinfo --map "$uri"' | awk '{ print $1, $2, $4 }' > "$tmpdir/map"
printf '0 65536 hole,zero\n65536 4096 data\n69632 978944 hole,zero\n' \
  > "$tmpdir/map.expected"
diff -u "$tmpdir/map.expected" "$tmpdir/map" ||
  fail "the map does not show the export file's holes"

# --- Bad parameters: exit 1, one line naming the parameter -----------------
bad ()
{
  local want="$1"
  shift
  refuses "$want" ondemand "$@" ||
    fail "ondemand $*: not refused with one line /$want/"
}
bad "dir" 1M
bad "size" dir="$d"
bad "$tmpdir/missing" dir="$tmpdir/missing" 1M
bad "not a directory" dir="$tmpdir/probe" 1M
bad "wait" dir="$d" 1M wait=maybe
bad "'disk'" dir="$d" 1M disk=x
bad "'a-b'" dir="$d" 1M a-b=x

finish
