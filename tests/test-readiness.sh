#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Readiness (nbdkit-service(1), READINESS):
#  - without -f, the command returns only once the server is ready: 20
#    times in a row the pid file names a live server and the socket
#    accepts at once (before, the parent returned before the child had
#    written the pid file, 9 runs in 10);
#  - a server that fails after forking makes the command fail (exit 1),
#    where it used to return 0 with no server behind it;
#  - with NOTIFY_SOCKET set, systemd's datagram socket hears
#    READY=1 and MAINPID=<the server's pid> once the server serves, and
#    STOPPING=1 on SIGTERM, also on an abstract socket ("@name"); the
#    --run command's environment has no NOTIFY_SOCKET.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

sock="$tmpdir/s" pid="$tmpdir/p"
cleanup_fn bash -c 'test -s "$1" && kill "$(cat "$1")" 2>/dev/null; :' _ "$pid"
for i in $(seq 1 20); do
  rm -f "$pid"
  t "$NBDKIT" -U "$sock" -P "$pid" memory 1M
  test -s "$pid" || fail "round $i: the command returned before the pid file"
  kill -0 "$(cat "$pid")" || fail "round $i: no server with the pid in the file"
  [ "$(nbdinfo --size "nbd+unix:///?socket=$sock")" = 1048576 ] ||
    fail "round $i: the socket did not serve at once"
  p=$(cat "$pid")
  kill "$p"
  for (( j = 0; j < 100; j++ )); do kill -0 "$p" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$p" 2>/dev/null && fail "round $i: the server did not stop"
done

# Failing after the fork: the pid file cannot be written.
status=0
"$NBDKIT" -U "$tmpdir/s2" -P "$tmpdir/no/such/dir/pid" memory 1M || status=$?
[ "$status" -eq 1 ] ||
  fail "a server that failed after forking: the command's status is $status"

# systemd's notifications.
cat > "$tmpdir/listen.py" <<'PY'
import os, socket, subprocess, sys, time
addr, nbdkit, sock = sys.argv[1], sys.argv[2], sys.argv[3]
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(addr if addr[0] != "@" else "\0" + addr[1:])
s.settimeout(30)
env = dict(os.environ, NOTIFY_SOCKET=addr)
p = subprocess.Popen([nbdkit, "-f", "-U", sock, "memory", "1M"], env=env)
msg = s.recv(4096).decode()
print(repr(msg))
lines = msg.split("\n")
assert "READY=1" in lines, msg
assert "MAINPID=%d" % p.pid in lines, (msg, p.pid)
# Ready means ready: the socket answers now.
out = subprocess.check_output(["nbdinfo", "--size",
                               "nbd+unix:///?socket=" + sock]).decode()
assert out.strip() == "1048576", out
p.terminate()
msg = s.recv(4096).decode()
print(repr(msg))
assert "STOPPING=1" in msg.split("\n"), msg
assert p.wait(30) == 0
PY
t /usr/bin/python3 "$tmpdir/listen.py" "$tmpdir/notify" "$NBDKIT" "$tmpdir/s3"
t /usr/bin/python3 "$tmpdir/listen.py" "@nbdkit-test-$$" "$NBDKIT" "$tmpdir/s4"

# Nothing the server starts inherits the variable.
out=$(NOTIFY_SOCKET="$tmpdir/nowhere" "$NBDKIT" -U - memory 1M \
        --run 'echo "[${NOTIFY_SOCKET-unset}]"')
[ "$out" = "[unset]" ] || fail "the --run command saw NOTIFY_SOCKET: $out"
