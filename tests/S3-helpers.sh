# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/S3-helpers.sh: sourced by the S3 plugin's tests, after
# functions.sh and requires_ceph (which set S3_ENDPOINT, S3_ACCESS_KEY,
# S3_SECRET_KEY and S3_REGION for the test cluster's radosgw).  The
# bucket is looked at with curl's own SigV4 signing, never with the
# plugin under test.
#
#   s3curl METHOD PATH [CURL ARGS]   a signed request; prints the body
#   s3_new_bucket NAME               make a bucket, removed at exit;
#                                    sets $bucket
#   s3_keys BUCKET PREFIX            the keys under PREFIX, one a line
#   s3_etags BUCKET PREFIX           "key etag size" lines
#   s3_put BUCKET KEY FILE           upload FILE as KEY
#   s3_rmbucket BUCKET               delete its objects and itself

requires_cmd curl

s3curl ()
{
  local method="$1" path="$2"
  shift 2
  curl -sS --max-time 20 -X "$method" \
       --aws-sigv4 "aws:amz:$S3_REGION:s3" \
       --user "$S3_ACCESS_KEY:$S3_SECRET_KEY" \
       -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' \
       "$@" "$S3_ENDPOINT$path"
}

# A listing's <Contents> entries, one "key etag size" line each (keys
# and etags of our tests have no spaces or XML entities).
s3_etags ()
{
  local b="$1" p="$2" out
  p="$(printf '%s' "$p" | sed 's,/,%2F,g')"
  out="$(s3curl GET "/$b?list-type=2&max-keys=1000&prefix=$p")"
  case "$out" in
    *"<ListBucketResult"*) ;;
    *) echo "$0: listing $b failed: $out" >&2; return 1 ;;
  esac
  printf '%s\n' "$out" | sed 's,<Contents>,\n&,g' |
    sed -n 's,.*<Key>\([^<]*\)</Key>.*<ETag>\([^<]*\)</ETag>.*<Size>\([0-9]*\)</Size>.*,\1 \2 \3,p' |
    sed 's/&quot;//g; s/"//g'
}

s3_keys ()
{
  s3_etags "$@" | cut -d' ' -f1
}

s3_put ()
{
  local code
  code="$(s3curl PUT "/$1/$2" -T "$3" -o /dev/null -w '%{http_code}')"
  [ "$code" = 200 ] || fail "PUT /$1/$2: HTTP $code"
}

s3_rmbucket ()
{
  local b="$1" k
  for k in $(s3_keys "$b" "" 2>/dev/null); do
    s3curl DELETE "/$b/$k" -o /dev/null || :
  done
  s3curl DELETE "/$b" -o /dev/null || :
}

s3_new_bucket ()
{
  local code
  bucket="$1-$$-$RANDOM"
  code="$(s3curl PUT "/$bucket" -o "$tmpdir/mkbucket.out" -w '%{http_code}')"
  [ "$code" = 200 ] ||
    fail "making bucket $bucket: HTTP $code $(cat "$tmpdir/mkbucket.out")"
  cleanup_fn s3_rmbucket "$bucket"
}

# s3_fake_start: a small fake store (Python) on 127.0.0.1:$fake_port,
# for what radosgw cannot be made to do.  The disk is key d in bucket
# b, size=1M object-size=64K: object N (the path's last 16 hex digits)
# is all byte N until it is PUT (then it holds what was put, in the
# store's memory) or DELETEd (then it is missing: 404 NoSuchKey).
# Files in $tmpdir/fake/ steer it, read at each GET, PUT and DELETE:
#   slow     "SECS N": objects below N wait SECS before the reply
#   status   200, 403, 404 (NoSuchKey), 404bucket (NoSuchBucket), 500,
#            quota (403 QuotaExceeded), or 500once (each object's first
#            request after the file changed is a 500)
#   gets     one line per object GET it got (written by it)
#   log      "METHOD N" per object request it got (written by it)
# Listings are empty.  Sets $fake_port, $fake (its pid, killed at
# exit) and $fake_args (the plugin's arguments for it); s3_fake_start
# again restarts it on the same port.
s3_fake_start ()
{
  mkdir -p "$tmpdir/fake"
  [ -n "${fake_port:-}" ] || fake_port=$(free_port)
  [ -f "$tmpdir/fake/slow" ] || echo "0 0" > "$tmpdir/fake/slow"
  [ -f "$tmpdir/fake/status" ] || echo 200 > "$tmpdir/fake/status"
  rm -f "$tmpdir/fake/listening"
  /usr/bin/python3 - "$fake_port" "$tmpdir/fake" <<'PY' 9>&- &
import http.server, os, re, sys, threading, time
port, d = int(sys.argv[1]), sys.argv[2]
lock = threading.Lock()
seen, stamp = set(), [None]
objects = {}                    # N: bytes put, or None once deleted
def read(name):
    return open(os.path.join(d, name)).read().split()
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def reply(self, code, body, extra=()):
        self.send_response(code)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def error(self, code, name):
        self.reply(code, b"<Error><Code>%s</Code></Error>" % name.encode())
    # The steering files for one request on object N: False if it was
    # answered with an error.
    def steer(self, n):
        with lock:
            if self.command == "GET":
                open(os.path.join(d, "gets"), "a").write("%d\n" % n)
            open(os.path.join(d, "log"), "a").write(
                "%s %d\n" % (self.command, n))
            st = os.stat(os.path.join(d, "status")).st_mtime_ns
            if stamp[0] != st:
                stamp[0] = st
                seen.clear()
            first = n not in seen
            seen.add(n)
        secs, below = read("slow")
        if n < int(below):
            time.sleep(float(secs))
        status = read("status")[0]
        errors = {"403": (403, "AccessDenied"), "404": (404, "NoSuchKey"),
                  "404bucket": (404, "NoSuchBucket"),
                  "quota": (403, "QuotaExceeded"),
                  "500": (500, "InternalError")}
        if status == "500once" and first:
            status = "500"
        if status in errors:
            self.error(*errors[status])
            return False
        return True
    def do_GET(self):
        if "list-type=2" in self.path:
            return self.reply(200, b"<ListBucketResult><IsTruncated>false"
                              b"</IsTruncated></ListBucketResult>")
        n = int(self.path[-16:], 16)
        if not self.steer(n):
            return
        with lock:
            data = objects.get(n, bytes([n]) * 65536)
        if data is None:
            return self.error(404, "NoSuchKey")
        a, b = map(int, re.match(r"bytes=(\d+)-(\d+)",
                                 self.headers["Range"]).groups())
        if a >= len(data):
            return self.error(416, "InvalidRange")
        self.reply(206, data[a:b + 1])
    def do_PUT(self):
        n = int(self.path[-16:], 16)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.steer(n):
            with lock:
                objects[n] = body
            self.reply(200, b"")
    def do_DELETE(self):
        n = int(self.path[-16:], 16)
        if self.steer(n):
            with lock:
                objects[n] = None
            self.reply(204, b"")
    def log_message(self, *a):
        pass
http.server.ThreadingHTTPServer.allow_reuse_address = True
http.server.ThreadingHTTPServer.request_queue_size = 128
s = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
s.daemon_threads = True
open(os.path.join(d, "listening"), "w").write("yes")
s.serve_forever()
PY
  fake=$!
  cleanup_fn _kill_pid $fake
  wait_for 10 -s "$tmpdir/fake/listening" || fail "the fake store did not start"
  fake_args=(S3 endpoint-url=http://127.0.0.1:$fake_port access-key=a
             secret-key=b bucket=b key=d size=1M object-size=64K)
}
