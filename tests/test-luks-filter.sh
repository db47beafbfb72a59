#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=luks serves the decrypted payload of LUKSv1 images that
# qemu-img made and encrypts what clients write so that qemu's own luks
# driver reads it back: bytes in, bytes out, both directions, including
# writes that cover part of a sector.  Where Debian's nbdkit 1.32 luks
# filter supports the image, both servers give the same size, flags,
# map, bytes and ciphertext on the same command.  Also: parallel
# clients, the passphrase forms, bad parameters, damaged headers.
#
# qemu-img spends seconds timing PBKDF2 for each image it makes, so the
# images in other ciphers, modes, IV generators and hashes are checked
# by test-luks-filter-ciphers.sh, which runs this script as
# "test-luks-filter.sh ciphers".
part="${1:-main}"
source "$(dirname "$0")/functions.sh"
source "$(dirname "$0")/debian-filters.sh"
requires_cmd qemu-img

pass="$tmpdir/passphrase"
echo -n "nbdkit-luks-test" > "$pass"
secret="secret,id=sec0,file=$pass"

raw="$tmpdir/disk.raw"
make_pattern "$raw" $(( 1024 * 1024 ))

# make_luks OUT OPTIONS: encrypt $raw into OUT with qemu-img.  A low
# iteration time keeps key derivation quick; qemu-img now and then
# gives up timing it ("Unable to get accurate CPU usage"), more often
# on a loaded machine (a CI run failed after 5 tries): retry, up to 30
# times, a little apart.
make_luks ()
{
  local out="$1" opts="$2" i
  rm -f "$out"
  for i in $(seq 30); do
    [ "$i" -eq 1 ] || sleep 0.2
    qemu-img convert -q --object "$secret" -O luks \
      -o "key-secret=sec0,iter-time=10${opts:+,$opts}" "$raw" "$out" \
      2> "$tmpdir/qemu-img.err" && return 0
  done
  fail "qemu-img convert -o $opts: $(cat "$tmpdir/qemu-img.err")"
}

# qemu_read IMG OUT: the plaintext of IMG as qemu's luks driver sees it.
qemu_read ()
{
  qemu-img convert -q --object "$secret" -O raw \
    --image-opts "driver=luks,key-secret=sec0,file.filename=$1" "$2"
}

# What the client writes: whole sectors, pieces of sectors, a run
# that starts and ends inside sectors, and the last bytes.  The same
# writes applied to a copy of $raw give what qemu must read back.
cat > "$tmpdir/writes.py" <<'PY'
size = 1024 * 1024
writes = [
    (0, bytes(range(256)) * 4),                 # sector 0, whole
    (4096 * 3 + 7, b"part of one sector"),      # inside sector 24
    (70000, bytes((i * 7) % 256 for i in range(5000))),  # ragged run
    (size - 100, b"z" * 100),                   # the end
    (262144, b"\0" * 131072),                   # aligned zeroes
]
PY
cat > "$tmpdir/expected.py" <<PY
import sys
exec(open("$tmpdir/writes.py").read())
data = bytearray(open("$raw", "rb").read())
for off, buf in writes:
    data[off:off + len(buf)] = buf
open(sys.argv[1], "wb").write(data)
PY
/usr/bin/python3 "$tmpdir/expected.py" "$tmpdir/expected"

# round_trip LABEL OPTIONS [IMAGE]: make an image (or copy IMAGE, made
# with OPTIONS), read it through the filter, write through the filter,
# and let qemu read what was written.
round_trip ()
{
  local label="$1" opts="$2" img="$tmpdir/rt.luks"
  if [ $# -gt 2 ]; then cp "$3" "$img"; else make_luks "$img" "$opts"; fi
  t "$NBDKIT" -U - --filter=luks file "$img" passphrase=+"$pass" \
    --run "nbdcopy \"\$uri\" $tmpdir/rt.read && nbdsh -u \"\$uri\" -c - <<PY
exec(open('$tmpdir/writes.py').read())
h.set_strict_mode(0)
for off, buf in writes:
    h.pwrite(buf, off)
h.flush()
for off, buf in writes:
    assert h.pread(len(buf), off) == buf, (off, len(buf))
PY" || fail "$label ($opts): the server or a client failed"
  cmp "$raw" "$tmpdir/rt.read" ||
    fail "$label ($opts): what the filter read differs from what qemu wrote"
  qemu_read "$img" "$tmpdir/rt.qemu"
  cmp "$tmpdir/expected" "$tmpdir/rt.qemu" ||
    fail "$label ($opts): qemu reads back other bytes than the filter wrote"
}

if [ "$part" = ciphers ]; then
  round_trip xts-128-sha1 "cipher-alg=aes-128,cipher-mode=xts,hash-alg=sha1"
  essiv="ivgen-alg=essiv,ivgen-hash-alg=sha256"
  round_trip xts-essiv \
    "cipher-alg=aes-256,cipher-mode=xts,$essiv,hash-alg=sha384"
  round_trip cbc-essiv \
    "cipher-alg=aes-256,cipher-mode=cbc,$essiv,hash-alg=sha512"
  round_trip cbc-plain \
    "cipher-alg=aes-128,cipher-mode=cbc,ivgen-alg=plain,hash-alg=sha224"
  round_trip ecb "cipher-alg=aes-256,cipher-mode=ecb,hash-alg=sha256"
  round_trip ctr \
    "cipher-alg=aes-128,cipher-mode=ctr,ivgen-alg=plain64,hash-alg=md5"
  exit 0
fi

# --- The same command on both servers ------------------------------------
# Debian's filter knows aes in xts and cbc modes with plain and plain64
# IVs (not essiv, ecb or ctr).  Sectors are encrypted with IVs from
# their numbers, so the same writes make the same ciphertext.
make_luks "$tmpdir/a.luks.orig" ""
make_luks "$tmpdir/b.luks.orig" \
  "cipher-alg=aes-128,cipher-mode=cbc,ivgen-alg=plain64,hash-alg=sha1"
round_trip default "" "$tmpdir/a.luks.orig"
round_trip cbc-plain64 "(b)" "$tmpdir/b.luks.orig"

sha="$(sha256sum < "$raw")"
for img in a b; do
  fresh_files=("$tmpdir/$img.luks")
  state_files=()
  compare_own "luks-$img" read --filter=luks file "$tmpdir/$img.luks" \
    passphrase=+"$pass"
  expect_in "luks-$img-bytes" "$ours" "^copy-all $sha\$"
  fresh_files=()
  state_files=("$tmpdir/$img.luks")
  compare_own "luks-$img-write" write --filter=luks file "$tmpdir/$img.luks" \
    passphrase=+"$pass"
  expect_in "luks-$img-write-ok" "$ours" "^pwrite ok"
done
state_files=()
finish

# --- Parallel clients -------------------------------------------------------
# nbdcopy writes the whole disk over four connections, then reads it
# back over four more; qemu agrees with what came back.  A hundred
# one-byte writes in flight at once, all inside two sectors, must all
# land (each is a read-modify-write of its sector).
cp "$tmpdir/a.luks.orig" "$tmpdir/p.luks"
head -c $(( 1024 * 1024 )) /dev/urandom > "$tmpdir/random"
start_server --filter=luks file "$tmpdir/p.luks" passphrase=+"$pass"
t nbdcopy --connections=4 --requests=16 "$tmpdir/random" "$uri"
t nbdcopy --connections=4 --requests=16 "$uri" "$tmpdir/random.back"
cmp "$tmpdir/random" "$tmpdir/random.back" || fail "parallel nbdcopy round trip"
t nbdsh -u "$uri" -c - <<'PY'
h.set_strict_mode(0)
cookies = [h.aio_pwrite(bytes([i + 1]), 4096 + i * 9) for i in range(100)]
while h.aio_in_flight() > 0:
    h.poll(-1)
for c in cookies:
    assert h.aio_command_completed(c)
got = h.pread(1024, 4096)
for i in range(100):
    assert got[i * 9] == i + 1, (i, got[i * 9])
PY
stop_server
qemu_read "$tmpdir/p.luks" "$tmpdir/p.qemu"
cmp -n 4096 "$tmpdir/random" "$tmpdir/p.qemu" ||
  fail "qemu after parallel writes"
/usr/bin/python3 - "$tmpdir/p.qemu" <<'PY'
import sys
got = open(sys.argv[1], "rb").read()
for i in range(100):
    assert got[4096 + i * 9] == i + 1, i
PY

# --- Passphrase forms and errors --------------------------------------------
size_with ()
{
  t "$NBDKIT" -U - --filter=luks file "$tmpdir/a.luks.orig" "$@" \
    --run 'nbdinfo --size "$uri"'
}
[ "$(size_with passphrase="$(cat "$pass")")" = 1048576 ] ||
  fail "passphrase=SECRET"
[ "$(size_with passphrase=-3 3<"$pass")" = 1048576 ] || fail "passphrase=-FD"
[ "$(size_with passphrase=- <"$pass")" = 1048576 ] || fail "passphrase=-"
# A wrong passphrase: the client cannot connect, the log says why.
# (Debian's filter crashes here, so this is not compared.)
status=0
size_with passphrase=wrong > /dev/null 2> "$tmpdir/wrong.err" || status=$?
[ "$status" -ne 0 ] || fail "a wrong passphrase was accepted"
msg='passphrase: the passphrase opens none of the disk.s 1 active key slots'
grep -q "luks\[1\]: error: $msg" "$tmpdir/wrong.err" ||
  { cat "$tmpdir/wrong.err"; fail "wrong passphrase message"; }

# check_param REGEX ARGS: the server refuses ARGS with exit 1 and one
# line matching REGEX.
check_param ()
{
  refuses "$1" --filter=luks file "$tmpdir/a.luks.orig" "${@:2}" ||
    fail "${*:2}: not refused with /$1/"
}
check_param '^nbdkit: luks: error: passphrase: the parameter is required'
check_param '^nbdkit: luks: error: passphrase: .*/no-such-file: No such file' \
  passphrase=+"$tmpdir/no-such-file"
check_param '^nbdkit: luks: error: passphrase: given more than once' \
  passphrase=a passphrase=b

# --- Hostile headers ---------------------------------------------------------
# Each damaged header fails the connection with its own message, and
# never crashes the server.
# bad_header LABEL REGEX PYTHON: patch a copy of the image with PYTHON
# (d is the bytearray of the file), then a client must fail and the
# server's log match REGEX.
bad_header ()
{
  local label="$1" regex="$2" py="$3" status=0
  /usr/bin/python3 - "$tmpdir/a.luks.orig" "$tmpdir/bad.luks" <<PY
import struct, sys
d = bytearray(open(sys.argv[1], "rb").read())
$py
open(sys.argv[2], "wb").write(d)
PY
  t "$NBDKIT" -U - --filter=luks file "$tmpdir/bad.luks" passphrase=+"$pass" \
    --run 'nbdinfo --size "$uri"' > /dev/null 2> "$tmpdir/bad.err" || status=$?
  [ "$status" -ne 0 ] && [ "$status" -lt 128 ] ||
    { cat "$tmpdir/bad.err"; fail "$label: client status $status"; }
  grep -Eq -- "$regex" "$tmpdir/bad.err" ||
    { cat "$tmpdir/bad.err"; fail "$label: no /$regex/ in the log"; }
}
bad_header magic 'no LUKS header' 'd[0:4] = b"LUKZ"'
bad_header version 'version 2 is not supported' 'd[7] = 2'
bad_header name 'cipher name field is not terminated' 'd[8:40] = b"a" * 32'
bad_header cipher "cipher 'twofish' is not supported" \
  'd[8:40] = b"twofish".ljust(32, b"\0")'
bad_header keybytes 'master key size 1000 is out of range' \
  'd[108:112] = struct.pack(">I", 1000)'
bad_header payload 'payload offset .* lies outside the disk' \
  'd[104:108] = struct.pack(">I", 0x7fffffff)'
bad_header slotstate 'key slot 0 is corrupt' \
  'd[208:212] = struct.pack(">I", 0x12345678)'
bad_header stripes 'key slot 0 has .* and 0 stripes' \
  'd[208 + 44:208 + 48] = struct.pack(">I", 0)'
bad_header material "key slot 0's key material .* overlaps" \
  'd[208 + 40:208 + 44] = struct.pack(">I", 0xfffffff0)'
bad_header noslots 'no key slot is in use' \
  'd[208:212] = struct.pack(">I", 0xdead)'
bad_header digest 'opens none of' 'd[112] ^= 1'
bad_header short 'too small to hold a LUKS header' 'del d[500:]'

# --- A payload that ends inside a sector --------------------------------------
# Only whole sectors are served.  (Debian's filter serves the partial
# sector and aborts when a client reads it.)
cp "$tmpdir/a.luks.orig" "$tmpdir/tail.luks"
truncate -s +1000 "$tmpdir/tail.luks"
t "$NBDKIT" -U - --filter=luks file "$tmpdir/tail.luks" passphrase=+"$pass" \
  --run "nbdinfo --size \"\$uri\" > $tmpdir/tail.size &&
         nbdcopy \"\$uri\" $tmpdir/tail.out"
[ "$(cat "$tmpdir/tail.size")" = $(( 1024 * 1024 + 512 )) ] ||
  fail "partial last sector: size $(cat "$tmpdir/tail.size")"
[ "$(stat -c %s "$tmpdir/tail.out")" = $(( 1024 * 1024 + 512 )) ] ||
  fail "partial last sector: nbdcopy did not copy every whole sector"
cmp -n $(( 1024 * 1024 )) "$raw" "$tmpdir/tail.out" ||
  fail "partial last sector: the payload before it changed"
