# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Sourced by the cdi plugin's tests, after functions.sh: a private
# docker-registry on 127.0.0.1 and podman with its storage (vfs) and
# its registries configuration in the test's directory, so nothing of
# the machine's podman state is used or changed.  Everything stays on
# 127.0.0.1, with no TLS (the registries configuration allows that for
# this registry only).
requires_cmd podman docker-registry
export PATH=/usr/bin:$PATH

cdi_so="$abs_top_builddir/plugins/cdi/.libs/nbdkit-cdi-plugin.so"
[ -f "$cdi_so" ] || fail "$cdi_so not built"

reg_port="$(free_port)"
registry="127.0.0.1:$reg_port"
mkdir "$tmpdir/reg" "$tmpdir/storage" "$tmpdir/run" "$tmpdir/ctx"
cat > "$tmpdir/registry.yml" <<EOF
version: 0.1
storage:
  filesystem:
    rootdirectory: $tmpdir/reg
http:
  addr: $registry
EOF
cat > "$tmpdir/storage.conf" <<EOF
[storage]
driver = "vfs"
runroot = "$tmpdir/run"
graphroot = "$tmpdir/storage"
EOF
cat > "$tmpdir/registries.conf" <<EOF
unqualified-search-registries = []
[[registry]]
location = "$registry"
insecure = true
EOF
export CONTAINERS_STORAGE_CONF="$tmpdir/storage.conf"
export CONTAINERS_REGISTRIES_CONF="$tmpdir/registries.conf"
# The plugin's private directory (and its copy of the layer) goes here.
export TMPDIR="$tmpdir"

timeout -k 5 120 docker-registry serve "$tmpdir/registry.yml" \
  > "$tmpdir/registry.log" 2>&1 &
cleanup_fn _kill_pid $!
wait_for_output "$tmpdir/registry.log" "listening on" $! 20 ||
  { cat "$tmpdir/registry.log"; fail "docker-registry did not start"; }
# podman's storage may hold read-only files: let the tmpdir go.
cleanup_fn chmod -R u+w "$tmpdir/storage"

# push_image NAME CONTAINERFILE-LINES...: build an image FROM scratch in
# $tmpdir/ctx with these lines after the FROM, push it to the registry
# as $registry/NAME, and remove it from podman's storage, so that the
# plugin has to pull it.
push_image ()
{
  local name="$1"
  shift
  printf 'FROM scratch\n' > "$tmpdir/ctx/Containerfile"
  printf '%s\n' "$@" >> "$tmpdir/ctx/Containerfile"
  t podman build -q -t "$registry/$name" "$tmpdir/ctx" \
    > "$tmpdir/build.log" 2>&1 &&
  t podman push "$registry/$name" > "$tmpdir/push.log" 2>&1 &&
  t podman rmi "$registry/$name" > /dev/null 2>&1 ||
    { cat "$tmpdir/build.log" "$tmpdir/push.log"
      fail "could not build and push $name"; }
}
