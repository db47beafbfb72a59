#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The S3 plugin's failures.  At start-up, a wrong secret, an unknown
# access key, a missing bucket, a missing object, a refused endpoint,
# an endpoint that never answers, a store that keeps answering 503, no
# credentials and a bad parameter each give one line naming the
# problem, exit status 1, and no hang (the silent endpoint within its
# timeout=); a 503 is retried retries= times, and a store that answers
# 503 once gets the server started by the retry.  At run time, credentials
# that stop working (the radosgw user suspended) give the client EPERM
# and a bucket that disappears gives EIO, while the server stays up and
# serves again once the user is enabled.  It would catch a start-up
# that succeeds without checking, a hang on a silent server, several
# lines or a vague message, and errors that reach the client as the
# wrong errno or take the server down.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdsh nbdinfo curl radosgw-admin
requires_ceph
source "$srcdir/S3-helpers.sh"
s3_new_bucket errors

good=(endpoint-url="$S3_ENDPOINT" region="$S3_REGION"
      access-key="$S3_ACCESS_KEY" secret-key="$S3_SECRET_KEY")
many=(size=1M object-size=64K)

# expect_startup_error REGEX MAX-SECONDS ARGS...: the server must exit
# 1 within MAX-SECONDS having printed one line, matching REGEX.
expect_startup_error ()
{
  local regex="$1" max="$2" start end rc=0
  shift 2
  start=$(date +%s)
  timeout -k 5 30 env -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY \
    HOME="$tmpdir/home" "$NBDKIT" -U - S3 "$@" --run true \
    > "$tmpdir/out" 2> "$tmpdir/err" 9>&- || rc=$?
  end=$(date +%s)
  cat "$tmpdir/err"
  [ "$rc" = 1 ] || fail "exit status $rc, not 1, for: $*"
  [ "$(wc -l < "$tmpdir/err")" = 1 ] || fail "not one line for: $*"
  grep -Eq "^nbdkit: S3: error: $regex" "$tmpdir/err" ||
    fail "the line does not match '$regex' for: $*"
  (( end - start <= max )) || fail "took $(( end - start )) s for: $*"
}
mkdir -p "$tmpdir/home"

expect_startup_error "credentials refused .*SignatureDoesNotMatch" 10 \
  "${good[@]}" secret-key=wrong bucket="$bucket" key=disk "${many[@]}"
expect_startup_error "credentials refused .*InvalidAccessKeyId" 10 \
  "${good[@]}" access-key=NOSUCHKEY bucket="$bucket" key=disk "${many[@]}"
expect_startup_error "credentials refused .*SignatureDoesNotMatch" 10 \
  "${good[@]}" secret-key=wrong bucket="$bucket" key=disk.img
expect_startup_error "bucket 'no-such-bucket-$$' does not exist at " 10 \
  "${good[@]}" bucket=no-such-bucket-$$ key=disk "${many[@]}"
expect_startup_error "bucket 'no-such-bucket-$$' does not exist at " 10 \
  "${good[@]}" bucket=no-such-bucket-$$ key=disk.img
expect_startup_error "object 'disk.img' not found in bucket '$bucket'" 10 \
  "${good[@]}" bucket="$bucket" key=disk.img

# Nothing listens on a port just found free.
port=$(free_port)
expect_startup_error ".*Failed to connect to 127.0.0.1 port $port" 10 \
  "${good[@]}" endpoint-url=http://127.0.0.1:$port bucket="$bucket" key=d
# A socket that listens but never answers: the connection is made (by
# the kernel), the reply never comes, timeout=2 ends it.
port=$(free_port)
/usr/bin/python3 -c '
import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen(8)
open(sys.argv[2], "w").write("listening")
time.sleep(60)' $port "$tmpdir/silent" 9>&- &
silent=$!
cleanup_fn _kill_pid $silent
wait_for 10 -s "$tmpdir/silent" || fail "the silent server did not start"
expect_startup_error ".*(timed out|Timeout)" 8 \
  "${good[@]}" endpoint-url=http://127.0.0.1:$port timeout=2 \
  bucket="$bucket" key=d "${many[@]}"

# A store that answers 503 Slow Down: retried (retries=2, so three
# tries), then one line.  One that answers 503 once and then lists the
# bucket: the retry makes the start-up pass.  The fake store counts
# the requests it got.
fake_store ()
{
  local fails="$1"
  port=$(free_port)
  rm -f "$tmpdir/count" "$tmpdir/fake"
  /usr/bin/python3 - $port "$tmpdir" "$fails" <<'PY' 9>&- &
import http.server, sys
port, d, fails = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
n = 0
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        global n
        n += 1
        open(d + "/count", "w").write(str(n))
        if n <= fails:
            body = b"<Error><Code>SlowDown</Code></Error>"
            self.send_response(503)
        else:
            body = b"<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>"
            self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *a):
        pass
s = http.server.HTTPServer(("127.0.0.1", port), H)
open(d + "/fake", "w").write("listening")
s.timeout = 30
while True:
    s.handle_request()
PY
  fake=$!
  cleanup_fn _kill_pid $fake
  wait_for 10 -s "$tmpdir/fake" || fail "the fake store did not start"
}
fake_store 100
expect_startup_error "http://127.0.0.1:$port answered HTTP 503 SlowDown" 10 \
  "${good[@]}" endpoint-url=http://127.0.0.1:$port retries=2 \
  bucket=b key=d "${many[@]}"
[ "$(cat "$tmpdir/count")" = 3 ] ||
  fail "$(cat "$tmpdir/count") tries of a 503, not 1 + retries=2"
_kill_pid $fake
fake_store 1
t "$NBDKIT" -U - S3 "${good[@]}" endpoint-url=http://127.0.0.1:$port \
  bucket=b key=d "${many[@]}" --run true ||
  fail "a store that answered 503 once did not get a retry"
[ "$(cat "$tmpdir/count")" = 2 ] ||
  fail "$(cat "$tmpdir/count") requests, want a 503 and its retry"
_kill_pid $fake

expect_startup_error "no credentials" 5 \
  endpoint-url="$S3_ENDPOINT" bucket="$bucket" key=d
expect_startup_error "size and object-size must be given together" 5 \
  "${good[@]}" bucket="$bucket" key=d size=1M
expect_startup_error "size must be a multiple of object-size" 5 \
  "${good[@]}" bucket="$bucket" key=d size=100k object-size=64k

# At run time: a user of its own, suspended and enabled again.
user="s3err-$$"
radosgw-admin user create --uid="$user" --display-name="$user" \
  --access-key="ERR$$KEY" --secret="err$$secret" > /dev/null
cleanup_fn radosgw-admin user rm --uid="$user" --purge-data
mine=(endpoint-url="$S3_ENDPOINT" region="$S3_REGION"
      access-key="ERR$$KEY" secret-key="err$$secret")
[ "$(S3_ACCESS_KEY="ERR$$KEY" S3_SECRET_KEY="err$$secret" \
     s3curl PUT "/$user-b" -o /dev/null -w '%{http_code}')" = 200 ] ||
  fail "could not make a bucket as $user"
start_server S3 "${mine[@]}" bucket="$user-b" key=disk "${many[@]}" \
  timeout=10 2> "$tmpdir/log"
t nbdsh -u "$uri" -c 'h.pwrite(b"x" * 4096, 0)'
radosgw-admin user suspend --uid="$user" > /dev/null
t nbdsh -u "$uri" -c '
for f in (lambda: h.pread(4096, 0), lambda: h.pwrite(b"y" * 512, 100)):
    try:
        f()
        raise Exception("a request of a suspended user succeeded")
    except nbd.Error as e:
        assert e.errno == "EPERM", e.errno
'
grep -q "HTTP 403 UserSuspended" "$tmpdir/log" ||
  fail "the log does not say why: $(cat "$tmpdir/log")"
radosgw-admin user enable --uid="$user" > /dev/null
t nbdsh -u "$uri" -c 'assert h.pread(4096, 0) == b"x" * 4096'

# The bucket goes: EIO, and the server stays up.
S3_ACCESS_KEY="ERR$$KEY" S3_SECRET_KEY="err$$secret" s3_rmbucket "$user-b"
t nbdsh -u "$uri" -c '
try:
    h.pwrite(b"z" * 512, 70000)
    raise Exception("a write into a deleted bucket succeeded")
except nbd.Error as e:
    assert e.errno == "EIO", e.errno
'
grep -q "HTTP 404 NoSuchBucket" "$tmpdir/log" ||
  fail "the log does not say NoSuchBucket: $(cat "$tmpdir/log")"
[ "$(t nbdinfo --size "$uri")" = 1048576 ] || fail "the server went down"
