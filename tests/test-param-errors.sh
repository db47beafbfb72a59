#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# A bad parameter value stops the server with exit 1 and one error line
# that names the layer and the parameter: a user with several size
# parameters on one command line sees which one was wrong.
source "$(dirname "$0")/functions.sh"

# check "REGEX" ARGS...: the server refuses ARGS with exactly one line
# on stderr, matching REGEX.
check ()
{
  refuses "$@" || fail "${*:2}: not refused with /$1/"
}

check '^nbdkit: offset: error: offset: could not parse size string \(foo\)$' \
  --filter=offset null 1M offset=foo
check '^nbdkit: offset: error: range: could not parse size string \(1Q\)$' \
  --filter=offset null 1M range=1Q
check '^nbdkit: memory: error: size: size 99999999999999999999 is too large$' \
  memory size=99999999999999999999
check "^nbdkit: null: error: unknown parameter 'bogus'\$" \
  --filter=offset null 1M bogus=1
# nbdkit_read_password's errors name the parameter too (Debian's curl
# plugin reads password= with it).
curl=/usr/lib/x86_64-linux-gnu/nbdkit/plugins/nbdkit-curl-plugin.so
if [ -f "$curl" ]; then
  check '^nbdkit: curl: error: password: open: /nonexistent/pw: No such file or directory$' \
    "$curl" url=http://127.0.0.1:1/x password=+/nonexistent/pw
fi
