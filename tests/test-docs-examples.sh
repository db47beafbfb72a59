#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The examples of the topic pages (nbdkit-captive, -probing, -protocol,
# -service, -tls, -loop and -hacking) run as printed and show what the
# pages say they show.
#
# Marking, in the POD source, as docs/nbdkit-tracing.pod does: a
# paragraph "=for test NAME" marks the next verbatim block (indented
# lines, up to the next unindented one) as the shell example NAME;
# "=for test-file NAME" marks it as a file called NAME that an example
# uses (a C source, a test script).  POD
# formatters ignore both, so readers see only the example.  Each
# example runs with bash (one leading space removed from each line) in
# a directory of its page's own, in page order, so that later examples
# find the files earlier ones made (the TLS certificates).  `nbdkit' is
# the build tree's wrapper (first on $PATH), and so is ./nbdkit;
# ./include holds the public headers.  Each NAME has a check_NAME
# below that runs it and checks its output; a marked example without a
# check, or a check whose example has gone, fails the test.
#
# Not run: nbdkit-client(1) and the nbd-client examples of
# nbdkit-loop(1) (they need the nbd kernel module and a second
# machine), the systemctl steps of nbdkit-service(1) (no systemd as
# pid 1 here: tests/test-service.sh checks the units instead), and the
# TCP examples (tests listen on Unix sockets only).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo nbdsh nbdcopy qemu-img certtool psktool cc \
  systemd-socket-activate

pages="captive probing protocol service tls loop hacking"

# ---- extraction -----------------------------------------------------------

mkdir "$tmpdir/ex" "$tmpdir/files"
: > "$tmpdir/names"
for page in $pages; do
  pod="$abs_top_srcdir/docs/nbdkit-$page.pod"
  awk -v ex="$tmpdir/ex" -v files="$tmpdir/files" -v page="$page" '
    # A verbatim block runs to the next unindented line: blank lines
    # inside it (between the functions of a C file) are kept.
    state == 2 && /^$/ { blanks++; next }
    state == 2 && /^[ \t]/ {
      for (; blanks > 0; blanks--) print "" > file
      sub(/^ /, ""); print > file; next
    }
    state == 2 { close(file); state = 0; blanks = 0 }
    /^=for test [a-z0-9-]+[[:space:]]*$/ {
      name = $3; file = ex "/" name ".sh"; state = 1
      print page, name >> (ex "/../names"); next
    }
    /^=for test-file [A-Za-z0-9._-]+[[:space:]]*$/ {
      name = $3; file = files "/" name; state = 1; next
    }
    state == 1 && /^[ \t]/ { state = 2; sub(/^ /, ""); print > file; next }
    state == 1 && /^[^ \t]/ {
      print "=for test " name ": no verbatim paragraph follows" > "/dev/stderr"
      exit 1
    }
  ' "$pod" || fail "$pod: bad =for test marking"
done
[ -s "$tmpdir/names" ] || fail "no marked examples found"

# The directories the examples run in, one per page.
for page in $pages; do
  d="$tmpdir/run/$page"
  mkdir -p "$d/include"
  ln -s "$abs_top_builddir/nbdkit" "$d/nbdkit"
  for h in "$abs_top_srcdir"/include/*.h "$abs_top_builddir"/include/*.h; do
    [ -e "$d/include/${h##*/}" ] || ln -s "$h" "$d/include/"
  done
  cp "$tmpdir/files"/* "$d/" 2>/dev/null || :
done

page_of () { awk -v n="$1" '$2 == n { print $1 }' "$tmpdir/names"; }

# Run example $1 in its page's directory, with /tmp/nbd.sock moved into
# $tmpdir; its output goes to $out.  $2, if given, is the status it
# must exit with (default 0).
out=
run_example ()
{
  local name=$1 want=${2:-0} f="$tmpdir/ex/$1.sh" r=0
  [ -f "$f" ] || fail "example $name is not marked in the pages"
  sed -i "s|/tmp/nbd.sock|$tmpdir/nbd.sock|g" "$f"
  echo "--- example $name:"
  cat "$f"
  out="$tmpdir/$name.out"
  ( cd "$tmpdir/run/$(page_of "$name")" && t bash "$f" ) > "$out" 2>&1 || r=$?
  cat "$out"
  [ "$r" -eq "$want" ] || fail "example $name exited with status $r, not $want"
}

# Start example $1 (a server) in the background; sets $bg.
bg=
start_example ()
{
  local name=$1 f="$tmpdir/ex/$1.sh"
  [ -f "$f" ] || fail "example $name is not marked in the pages"
  sed -i "s|/tmp/nbd.sock|$tmpdir/nbd.sock|g" "$f"
  echo "--- example $name (in the background):"
  cat "$f"
  rm -f "$tmpdir/nbd.sock"
  { printf 'exec '; cat "$f"; } > "$f.exec"
  ( cd "$tmpdir/run/$(page_of "$name")" && exec bash "$f.exec" ) \
    > "$tmpdir/$name.out" 2>&1 &
  bg=$!
  cleanup_fn _kill_pid "$bg"
  wait_for 10 -S "$tmpdir/nbd.sock" || fail "example $name did not listen"
}
stop_example ()
{
  kill "$bg" 2>/dev/null || :
  wait "$bg" 2>/dev/null || :
}

has () { grep -Eq -- "$1" "$out" || fail "output of the example lacks /$1/"; }

# ---- nbdkit-captive(1) ------------------------------------------------------

check_captive_nbdsh () { run_example captive-nbdsh; has '^1048576$'; }
check_captive_copy ()
{
  head -c 1M /dev/urandom > "$tmpdir/run/captive/disk.img"
  run_example captive-copy
  cmp "$tmpdir/run/captive/disk.img" "$tmpdir/run/captive/copy.img" ||
    fail "copy.img differs from disk.img"
}
check_captive_qemu_img ()
{
  run_example captive-qemu-img
  (cd "$tmpdir/run/captive" &&
   t qemu-img compare -f raw -F qcow2 disk.img disk.qcow2) ||
    fail "disk.qcow2 does not hold disk.img"
}
check_captive_status ()
{
  run_example captive-status; has '^1048576$'; has '^status 3$'
}
check_captive_exit_with_parent ()
{
  run_example captive-exit-with-parent; has '^1073741824$'
  local d="$tmpdir/run/captive" pid
  # The pid file stays after the server exits (nbdkit(1) -P).
  pid="$(cat "$d/nbd.pid")" || fail "no nbd.pid"
  wait_for 10 ! -e "/proc/$pid" ||
    fail "the server outlived its parent (pid $pid still running)"
  [ ! -e "$d/nbd.sock" ] || fail "the server left its socket behind"
  [ "$(cat "$d/nbd.pid")" = "$pid" ] || fail "nbd.pid did not stay"
}
check_captive_exit_with_parent_check ()
{
  run_example captive-exit-with-parent-check; has '^supported$'
}

# ---- nbdkit-probing(1) ------------------------------------------------------

check_probing_version ()
{
  run_example probing-version; has '^nbdkit 1\.[0-9]+\.[0-9]+'
}
check_probing_dump_config ()
{
  run_example probing-dump-config
  has '^plugindir=/'; has '^filterdir=/'; has '^version_major=1$'
  has '^version_minor=[0-9]+$'; has '^tls=(yes|no)$'; has '^probes=(yes|no)$'
}
check_probing_require () { run_example probing-require; has '^nbdkit 1\.[0-9]+ will do$'; }
check_probing_probes ()
{
  if grep -q '^#define ENABLE_PROBES 1' "$abs_top_builddir/config.h"; then
    run_example probing-probes; has '^USDT probes built in$'
  else
    run_example probing-probes 1
  fi
}
check_probing_dump_plugin ()
{
  run_example probing-dump-plugin; has '^name=memory$'; has '^has_pread=1$'
  has '^magic_config_key=size$'
}
check_probing_plugin_missing ()
{
  run_example probing-plugin-missing; has '^memory: yes$'; has '^nosuch: no$'
}
check_probing_filter () { run_example probing-filter; has '^nbdkit 1\.'; }

# ---- nbdkit-protocol(1) -----------------------------------------------------

check_protocol_nbdinfo ()
{
  run_example protocol-nbdinfo
  has '^protocol: newstyle-fixed without TLS, using structured packets'
  has 'base:allocation'; has 'can_multi_conn: true'
  # The memory plugin gives no block sizes, so none are advertised.
  ! grep -q 'block_size_' "$out" || fail "block sizes advertised for memory"
}
check_protocol_oldstyle ()
{
  run_example protocol-oldstyle; has '^protocol: oldstyle without TLS, using simple packets'
}
check_protocol_no_sr ()
{
  run_example protocol-no-sr; has 'using simple packets'
  ! grep -q 'base:allocation' "$out" || fail "--no-sr still offered base:allocation"
}
check_protocol_map ()
{
  run_example protocol-map
  has '^ +0 +65536 +0 +data$'; has '^ +65536 +983040 +3 +hole,zero$'
}
check_protocol_past_end () { run_example protocol-past-end; has '^EINVAL$'; }

# ---- nbdkit-service(1) ------------------------------------------------------

check_service_activate_server ()
{
  start_example service-activate-server
  run_example service-activate-client; has '^1073741824$'
  # Still the same server for a second client.
  run_example service-activate-client; has '^1073741824$'
  stop_example
}
check_service_activate_client () { :; }   # run by the server's check
check_service_inetd_server ()
{
  start_example service-inetd-server
  run_example service-inetd-client
  has "^bytearray\(b'\\\\x00\\\\x00\\\\x00\\\\x00\\\\x00'\)$"
  stop_example
}
check_service_inetd_client () { :; }      # run by the server's check

# ---- nbdkit-tls(1) ------------------------------------------------------------

check_tls_ca ()
{
  run_example tls-ca
  [ -s "$tmpdir/run/tls/ca-cert.pem" ] || fail "no ca-cert.pem"
}
check_tls_server_cert ()
{
  run_example tls-server-cert
  (cd "$tmpdir/run/tls" &&
   certtool --verify --load-ca-certificate ca-cert.pem \
     --infile server-cert.pem > /dev/null) ||
    fail "server-cert.pem does not verify against ca-cert.pem"
}
check_tls_client_cert ()
{
  run_example tls-client-cert
  (cd "$tmpdir/run/tls" &&
   certtool --verify --load-ca-certificate ca-cert.pem \
     --infile client-cert.pem > /dev/null) ||
    fail "client-cert.pem does not verify against ca-cert.pem"
}
check_tls_x509 ()
{
  run_example tls-x509; has '^protocol: newstyle-fixed with TLS'
  has 'export-size: 1073741824'
}
check_tls_x509_refused () { run_example tls-x509-refused; has '^refused$'; }
check_tls_psk_make ()
{
  run_example tls-psk-make
  grep -Eq '^alice:[0-9a-f]+$' "$tmpdir/run/tls/keys/keys.psk" ||
    fail "keys.psk holds no key for alice"
}
check_tls_psk () { run_example tls-psk; has '^1073741824$'; }
check_tls_psk_qemu () { run_example tls-psk-qemu; has '^virtual size: 1 GiB'; }
check_tls_psk_plaintext () { run_example tls-psk-plaintext; has '^refused$'; }

# ---- nbdkit-loop(1) -----------------------------------------------------------

_umount_if_mounted () { ! mountpoint -q "$1" || umount -l "$1"; }
check_loop_nbdfuse ()
{
  if [ "$(id -u)" -ne 0 ] || [ ! -c /dev/fuse ] ||
     ! command -v nbdfuse > /dev/null; then
    echo "loop-nbdfuse: needs root, /dev/fuse and nbdfuse; not run"
    return
  fi
  cleanup_fn _umount_if_mounted "$tmpdir/run/loop/dir"
  run_example loop-nbdfuse; has '^hello$'
}

# ---- nbdkit-hacking(1) --------------------------------------------------------

check_hacking_plugin () { run_example hacking-plugin; has "^bytearray\(b'hhhh'\)$"; }
check_hacking_test ()
{
  # The test-file test-hello.sh, run as make check would run it.
  mkdir "$tmpdir/hello-tests"
  cp "$tmpdir/files/test-hello.sh" "$tmpdir/hello-tests/"
  ln -s "$abs_top_srcdir/tests/functions.sh" "$tmpdir/hello-tests/"
  echo "--- test-file test-hello.sh:"
  cat "$tmpdir/hello-tests/test-hello.sh"
  t bash "$tmpdir/hello-tests/test-hello.sh" ||
    fail "the example test in nbdkit-hacking(1) failed"
}

# ---- run them all, in page order -------------------------------------------

awk '{ print $2 }' "$tmpdir/names" | sort > "$tmpdir/marked"
[ -f "$tmpdir/files/test-hello.sh" ] && echo hacking-test >> "$tmpdir/marked"
sort -o "$tmpdir/marked" "$tmpdir/marked"
declare -F | sed -n 's/^declare -f check_//p' | tr _ - | sort > "$tmpdir/checks"
diff -u "$tmpdir/checks" "$tmpdir/marked" ||
  fail "marked examples and the checks of this test differ"
for name in $(awk '{ print $2 }' "$tmpdir/names") hacking-test; do
  "check_${name//-/_}"
done
echo "all $(wc -l < "$tmpdir/marked") examples ok"
