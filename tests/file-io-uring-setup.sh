# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Sourced by the test-file-io-uring-*.sh tests after functions.sh: skip
# (77) if the file plugin was built without liburing, and set $dir to a
# directory on a file system that takes O_DIRECT ($tmpdir, else one in
# /var/tmp: tmpfs before Linux 6.6 refuses O_DIRECT), removed at exit.
"$NBDKIT" file --dump-plugin | grep -q '^file_io_uring=yes' || {
  echo "$0: SKIP: the file plugin was built without liburing"
  exit 77
}
dir="$tmpdir"
if ! /usr/bin/python3 -c 'import os, sys
os.close(os.open(sys.argv[1] + "/probe", os.O_RDWR | os.O_CREAT | os.O_DIRECT))
' "$dir" 2>/dev/null; then
  dir="$(mktemp -d /var/tmp/nbdkit-test.XXXXXX)"
  cleanup_fn rm -rf "$dir"
fi
