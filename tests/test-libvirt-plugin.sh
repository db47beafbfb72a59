#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The libvirt plugin against a real libvirtd (Debian's, qemu driver)
# started by the test on a private Unix socket, with a domain defined
# (not started) whose disk is a local file.  Checked: nbdcopy reads the
# disk back byte for byte, by target name and by source path; Debian's
# libvirt plugin gives the same bytes on the same command line; the
# probes show the disk found and reads cut into peeks of at most
# 64 KiB; an unknown domain or disk fails the connection with the
# reason in the log; the export is read-only.  (libvirt's test driver,
# test:///, has no virDomainBlockPeek, hence the daemon.)  bpftrace's
# exclusive lock also keeps two of these tests from sharing the qemu
# driver's state directory.
source "$(dirname "$0")/functions.sh"
# libvirt's RPC encodes its messages with the XDR functions of libtirpc,
# loaded with the plugin after AddressSanitizer has resolved its own
# XDR interceptors to nothing: the first call jumps to address 0 (the
# same as libguestfs's; llvm-project issue 81470).
skip_under_sanitizers "ASan's XDR interceptors crash libvirt's RPC"
requires_tracer nbdsh nbdcopy virsh
requires test -x /usr/sbin/libvirtd
requires id libvirt-qemu
export PATH=/usr/bin:$PATH

so="$abs_top_builddir/plugins/libvirt/.libs/nbdkit-libvirt-plugin.so"
[ -f "$so" ] || fail "$so not built"
run="$tmpdir/run"
mkdir -m 700 "$run"
cat > "$tmpdir/libvirtd.conf" <<EOF
unix_sock_dir = "$run"
unix_sock_rw_perms = "0700"
auth_unix_rw = "none"
auth_unix_ro = "none"
log_outputs = "3:file:$tmpdir/libvirtd.log"
EOF
timeout -k 5 120 /usr/sbin/libvirtd -f "$tmpdir/libvirtd.conf" \
  -p "$run/pid" > "$tmpdir/libvirtd.out" 2>&1 &
cleanup_fn _kill_pid $!
wait_for 30 -S "$run/libvirt-sock" ||
  { cat "$tmpdir/libvirtd.out"; tail "$tmpdir/libvirtd.log"
    fail "libvirtd did not start"; }
uri="qemu+unix:///system?socket=$run/libvirt-sock"

size=$(( 3 * 1024 * 1024 + 4096 ))
head -c $size /dev/urandom > "$tmpdir/disk.img"
dom="nbdkit-test-$$"
cat > "$tmpdir/dom.xml" <<EOF
<domain type='qemu'>
  <name>$dom</name>
  <memory unit='MiB'>64</memory>
  <os><type arch='x86_64'>hvm</type></os>
  <devices>
    <disk type='file' device='disk'>
      <driver name='qemu' type='raw'/>
      <source file='$tmpdir/disk.img'/>
      <target dev='vda' bus='virtio'/>
    </disk>
  </devices>
</domain>
EOF
t virsh -q -c "$uri" define "$tmpdir/dom.xml" >/dev/null ||
  fail "virsh define failed"
cleanup_fn t virsh -q -c "$uri" undefine "$dom"

cat > "$tmpdir/trace.bt" <<BT
usdt:$so:nbdkit:libvirt_disk {
  printf("disk %s %s %d\n", str(arg0), str(arg1), arg2); }
usdt:$so:nbdkit:libvirt_peek {
  @peeks = count(); @max = max(arg3);
  if (arg5 != 0 || arg4 == 0 || arg0 < 1 || arg1 < 1) {
    printf("bad peek %d %d %d %d %d %d\n", arg0, arg1, arg2, arg3, arg4, arg5); }
}
BT
start_bpftrace 60 "$tmpdir/trace" "$tmpdir/trace.err" "$tmpdir/trace.bt"

# Ours by target name and by source path; Debian's by target name.
n=0
for server in "$NBDKIT" /usr/bin/nbdkit; do
  for disk in vda "$tmpdir/disk.img"; do
    n=$(( n + 1 ))
    [ "$server$n" = /usr/bin/nbdkit4 ] && continue
    t "$server" -U - libvirt connect="$uri" domain="$dom" disk="$disk" \
      --run "nbdcopy \"\$uri\" $tmpdir/out$n" ||
      fail "$server libvirt disk=$disk failed"
    cmp "$tmpdir/disk.img" "$tmpdir/out$n" ||
      fail "$server libvirt disk=$disk: the bytes differ from the disk"
  done
done
cmp "$tmpdir/out1" "$tmpdir/out3" || fail "ours and Debian's differ"

t "$NBDKIT" -U - libvirt connect="$uri" domain="$dom" disk=vda \
  --run 'nbdsh -u "$uri" -c "
assert h.is_read_only()
assert h.get_size() == '$size'
"' || fail "not read-only, or the wrong size"
interrupt_tracer "$bt"
grep -qx "disk $dom vda $size" "$tmpdir/trace" ||
  { cat "$tmpdir/trace"; fail "no libvirt_disk probe for vda"; }
! grep '^bad' "$tmpdir/trace" || fail "a peek failed or had bad arguments"
grep -q '^@max: 65536$' "$tmpdir/trace" ||
  { cat "$tmpdir/trace"; fail "the largest peek was not 64 KiB"; }

# What fails, fails the client's connection and says why.
t "$NBDKIT" -U - libvirt connect="$uri" domain=nosuch disk=vda \
  --run 'nbdinfo "$uri"' > /dev/null 2> "$tmpdir/err" &&
  fail "an unknown domain was served"
grep -q "domain nosuch:.*not found\|domain nosuch: .*no domain" "$tmpdir/err" ||
  { cat "$tmpdir/err"; fail "no reason given for the unknown domain"; }
t "$NBDKIT" -U - libvirt connect="$uri" domain="$dom" disk=vdz \
  --run 'nbdinfo "$uri"' > /dev/null 2> "$tmpdir/err" &&
  fail "an unknown disk was served"
grep -q "disk vdz of $dom:" "$tmpdir/err" ||
  { cat "$tmpdir/err"; fail "no reason given for the unknown disk"; }
refuses 'domain= and disk= are required' libvirt domain=x ||
  fail "a missing disk= was not refused"
