# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# golang_build NAME...: build the Go binding's examples NAME (in
# plugins/golang/examples) as plugin .so files in $tmpdir, with Debian's
# go, offline, against this tree's headers.  The build cache is shared
# by the Go tests of this build directory (the first build compiles the
# runtime, ~30 s; later ones take seconds).  Sourced after functions.sh.
golang_build ()
{
  local n
  [ -x /usr/bin/go ] || { echo "$0: SKIP: /usr/bin/go (Debian's golang-go) is not installed"; exit 77; }
  for n in "$@"; do
    ( cd "$abs_top_srcdir/plugins/golang" &&
      GOCACHE="$abs_top_builddir/tests/go-cache" GOPATH="$tmpdir/gopath" \
      GOFLAGS=-mod=mod GOPROXY=off GOTOOLCHAIN=local CGO_ENABLED=1 \
      CGO_CFLAGS="-I$abs_top_srcdir/include -I$abs_top_builddir/include" \
      timeout 600 /usr/bin/go build -buildmode=c-shared \
        -o "$tmpdir/$n.so" "./examples/$n" ) > "$tmpdir/build-$n.log" 2>&1 ||
      { cat "$tmpdir/build-$n.log"; fail "go build of the $n example failed"; }
  done
}
