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
