#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Where the S3 plugin finds its credentials and endpoint, against
# radosgw: the parameters, AWS_ACCESS_KEY_ID and friends,
# ~/.aws/credentials (the profile chosen by AWS_PROFILE or profile=),
# AWS_SHARED_CREDENTIALS_FILE, ~/.aws/config ([profile NAME]),
# AWS_ENDPOINT_URL; and which wins when several give them (parameters,
# then the environment, then the files).  Each place is tried with the
# right secret (the server serves) and with a wrong one (refused), so
# a source that is not read, or read in the wrong order, fails the
# test.  session-token= must be sent (seen in -D S3.verbose=1).
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo curl
requires_ceph
source "$srcdir/S3-helpers.sh"
s3_new_bucket creds

home="$tmpdir/home"
mkdir -p "$home/.aws"
cat > "$home/.aws/credentials" <<EOF
[default]
aws_access_key_id = $S3_ACCESS_KEY
aws_secret_access_key = wrong-default

# a comment
[good]
aws_access_key_id = $S3_ACCESS_KEY
aws_secret_access_key = $S3_SECRET_KEY
EOF
cat > "$home/.aws/config" <<EOF
[default]
region = $S3_REGION

[profile cfg]
region = $S3_REGION
aws_access_key_id = $S3_ACCESS_KEY
aws_secret_access_key = $S3_SECRET_KEY
  nested = ignored
EOF
cat > "$tmpdir/shared" <<EOF
[default]
aws_access_key_id=$S3_ACCESS_KEY
aws_secret_access_key=$S3_SECRET_KEY
EOF

# try ok|refused [VAR=VALUE ...] -- [PARAM=VALUE ...]: run the server
# with only those variables (and HOME) set, and the bucket's params.
try ()
{
  local want="$1" envs=() rc=0
  shift
  while [ "$1" != -- ]; do envs+=("$1"); shift; done
  shift
  timeout -k 5 30 env -i PATH="$PATH" HOME="$home" "${envs[@]}" \
    "$NBDKIT" -U - S3 bucket="$bucket" key=disk size=1M object-size=64K \
    "$@" --run 'nbdinfo --size "$uri"' > "$tmpdir/out" 2> "$tmpdir/err" \
    9>&- || rc=$?
  case "$want,$rc" in
    ok,0)
      [ "$(cat "$tmpdir/out")" = 1048576 ] || fail "wrong size with: $*" ;;
    refused,1)
      grep -q "credentials refused" "$tmpdir/err" ||
        fail "refused, but not for the credentials, with ${envs[*]} $*:" \
             "$(cat "$tmpdir/err")" ;;
    *)
      cat "$tmpdir/err"
      fail "want $want, got exit status $rc with: ${envs[*]} $*" ;;
  esac
}
E="endpoint-url=$S3_ENDPOINT"
KEYS="AWS_ACCESS_KEY_ID=$S3_ACCESS_KEY"

# The environment, and the parameters before it.
try ok "$KEYS" "AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY" -- "$E"
try refused "$KEYS" AWS_SECRET_ACCESS_KEY=wrong -- "$E"
try ok "$KEYS" AWS_SECRET_ACCESS_KEY=wrong -- "$E" \
  access-key="$S3_ACCESS_KEY" secret-key="$S3_SECRET_KEY"
try ok "$KEYS" AWS_SECRET_ACCESS_KEY=wrong -- "$E" \
  access_key="$S3_ACCESS_KEY" secret_key="$S3_SECRET_KEY"
# The endpoint from the environment.
try ok "$KEYS" "AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY" \
  "AWS_ENDPOINT_URL=$S3_ENDPOINT" --

# ~/.aws/credentials: [default] has a wrong secret, [good] the right.
try refused -- "$E"
try ok AWS_PROFILE=good -- "$E"
try ok -- "$E" profile=good
# The environment before the file.
try ok "$KEYS" "AWS_SECRET_ACCESS_KEY=$S3_SECRET_KEY" -- "$E"
# Another credentials file.
try ok "AWS_SHARED_CREDENTIALS_FILE=$tmpdir/shared" -- "$E"
# The config file's [profile cfg] (the credentials file has no [cfg]).
try ok AWS_PROFILE=cfg -- "$E"
sed 's/^aws_secret_access_key = .*/aws_secret_access_key = wrong-cfg/' \
  "$home/.aws/config" > "$tmpdir/config2"
try refused AWS_PROFILE=cfg "AWS_CONFIG_FILE=$tmpdir/config2" -- "$E"

# session-token= goes out with every request, signed (radosgw ignores
# a token it did not issue, so only the trace can show it), and the
# trace does not show its value.
timeout -k 5 30 "$NBDKIT" -v -D S3.verbose=1 -U - S3 "$E" \
  bucket="$bucket" key=disk size=1M object-size=64K \
  access-key="$S3_ACCESS_KEY" secret-key="$S3_SECRET_KEY" \
  session-token=TOKEN123 --run 'nbdinfo --size "$uri"' \
  > /dev/null 2> "$tmpdir/verbose" 9>&- ||
  { cat "$tmpdir/verbose"; fail "the server failed with session-token="; }
grep -q "> x-amz-security-token: (hidden)" "$tmpdir/verbose" ||
  fail "no x-amz-security-token header in the trace"
grep -q "SignedHeaders=.*x-amz-security-token" "$tmpdir/verbose" ||
  fail "the token is not signed"
# Neither the secret nor the token is printed.
if grep -Eq "$S3_SECRET_KEY|TOKEN123" "$tmpdir/verbose"; then
  fail "a secret is in the debug output"
fi
