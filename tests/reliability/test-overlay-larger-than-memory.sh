#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The cow and cache filters keep their overlay on disk, so it may grow
# past the memory the server is allowed: in a memory cgroup of 256 MiB
# that this test makes (cgroup v2 where its memory controller is
# mounted, else v1), 512 MiB are written through --filter=cow and
# through --filter=cache over the null plugin (which keeps nothing) and
# read back with the same sha256, and the server lives on.  The overlay
# is an unnamed file in $TMPDIR (the server holds it open, the directory
# shows no name), it holds the data on disk, and nothing is left in
# $TMPDIR once the server is gone.  Debian's nbdkit, whose overlay is
# also a temporary file, passes the same checks.  And as with nbdkit,
# a TMPDIR where no file can be made stops the server at start-up, with
# a message naming the directory.
#
# A server that kept the overlay in its own memory is killed by the
# kernel's OOM killer half way through the copy.
source "$(dirname "$0")/../functions.sh"
requires_root
requires_cmd nbdcopy sha256sum stat
# In a sanitizer build, ASan's quarantine of freed memory (256 MiB by
# default) would count against the cgroup too: keep it small.
if [ -n "${NBDKIT_SANITIZERS:-}" ]; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
fi

limit=$(( 256 * 1024 * 1024 ))
size=$(( 512 * 1024 * 1024 ))

# --- A TMPDIR that cannot hold the overlay --------------------------------

for filter in cow cache; do
  for bin in "$NBDKIT" /usr/bin/nbdkit; do
    [ -x "$bin" ] || continue
    if TMPDIR="$tmpdir/missing" t "$bin" -U - --filter="$filter" null 1M \
         --run true 2> "$tmpdir/err"; then
      fail "$bin --filter=$filter started with TMPDIR=$tmpdir/missing"
    fi
    grep -q "$tmpdir/missing" "$tmpdir/err" ||
      fail "$bin --filter=$filter: the error does not name TMPDIR:" \
        "$(cat "$tmpdir/err")"
  done
done

# --- A memory cgroup of our own -------------------------------------------

# The mount point of the first mount of file system type $1 whose
# super options match the regular expression $2 (mountinfo's optional
# fields vary in number: the type is the field after "-").
mount_of ()
{
  awk -v type="$1" -v opts="$2" '{
    for (i = 7; i < NF; i++)
      if ($i == "-") {
        if ($(i + 1) == type && $(i + 3) ~ opts) { print $5; exit }
        break
      }
  }' /proc/self/mountinfo
}

# Sets $cg (the new cgroup's directory) and $cg_v (1 or 2), or returns 1.
make_cgroup ()
{
  local mnt rel
  # cgroup v2, where its memory controller is offered.
  mnt="$(mount_of cgroup2 '')"
  if [ -n "$mnt" ] && grep -qw memory "$mnt/cgroup.controllers" 2>/dev/null
  then
    # A child of the root, where the controller can be enabled for
    # children whatever processes the root holds.
    grep -qw memory "$mnt/cgroup.subtree_control" ||
      echo +memory > "$mnt/cgroup.subtree_control" 2>/dev/null || :
    if grep -qw memory "$mnt/cgroup.subtree_control" &&
       mkdir "$mnt/nbdkit-test-overlay.$$" 2>/dev/null; then
      cg="$mnt/nbdkit-test-overlay.$$" cg_v=2
      return 0
    fi
  fi
  # cgroup v1: a child of the memory cgroup this test runs in (the
  # limit then nests inside whatever bounds the test), or of the root.
  mnt="$(mount_of cgroup '(^|,)memory(,|$)')"
  [ -n "$mnt" ] || return 1
  rel="$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3; exit }' /proc/self/cgroup)"
  for cg in "$mnt$rel/nbdkit-test-overlay.$$" "$mnt/nbdkit-test-overlay.$$"; do
    if mkdir "$cg" 2>/dev/null; then
      cg_v=1
      return 0
    fi
  done
  return 1
}

# Kill whatever is left in the cgroup, then remove it (bounded).
remove_cgroup ()
{
  local i p
  for (( i = 0; i < 50; i++ )); do
    for p in $(cat "$cg/cgroup.procs" 2>/dev/null); do
      kill -9 "$p" 2>/dev/null
    done
    rmdir "$cg" 2>/dev/null && return 0
    [ -d "$cg" ] || return 0
    sleep 0.1
  done
  echo "$0: could not remove $cg" >&2
}

if ! make_cgroup; then
  echo "$0: SKIP: no memory cgroup controller can be used here"
  exit 77
fi
cleanup_fn remove_cgroup
if [ "$cg_v" = 2 ]; then
  echo "$limit" > "$cg/memory.max"
  # No swap to hide in, where the machine has some.
  [ -f "$cg/memory.swap.max" ] && echo 0 > "$cg/memory.swap.max"
else
  echo "$limit" > "$cg/memory.limit_in_bytes"
  [ -f "$cg/memory.memsw.limit_in_bytes" ] &&
    { echo "$limit" > "$cg/memory.memsw.limit_in_bytes"; } 2>/dev/null || :
fi
echo "$0: memory cgroup v$cg_v at $cg, limit $limit bytes"

# How many times the OOM killer struck in the cgroup.
oom_kills ()
{
  local f="$cg/memory.events"
  [ "$cg_v" = 1 ] && f="$cg/memory.oom_control"
  awk '$1 == "oom_kill" { print $2 }' "$f" 2>/dev/null
}

# --- The overlay's directory, on disk -------------------------------------

# A tmpfs TMPDIR would put the overlay back in memory (the cgroup's).
ovl="$tmpdir/overlay"
if [ "$(stat -f -c %T "$tmpdir")" = tmpfs ]; then
  ovl="$(mktemp -d /var/tmp/nbdkit-test-overlay.XXXXXX)"
  cleanup_fn rm -rf "$ovl"
  if [ "$(stat -f -c %T "$ovl")" = tmpfs ]; then
    echo "$0: SKIP: neither $tmpdir nor /var/tmp is on a disk"
    exit 77
  fi
else
  mkdir "$ovl"
fi

# Random bytes, so that nothing can be skipped or compressed.
head -c "$size" /dev/urandom > "$tmpdir/source"
want="$(sha256sum < "$tmpdir/source")"

# check NAME BIN FILTER [NBDCOPY-FLAGS]: the whole story for one server
# and filter.
check ()
{
  local name="$1" bin="$2" filter="$3" what="$1 --filter=$3"
  local flags=("${@:4}") kills_before fd link found="" got
  kills_before="$(oom_kills)"
  # start_server runs $NBDKIT: here a script that joins the cgroup and
  # sets TMPDIR, then becomes BIN.
  printf '#!/bin/sh\necho $$ > %q/cgroup.procs || exit 1\nTMPDIR=%q exec %q "$@"\n' \
    "$cg" "$ovl" "$bin" > "$tmpdir/in-cgroup"
  chmod +x "$tmpdir/in-cgroup"
  local nbdkit_saved="$NBDKIT"
  NBDKIT="$tmpdir/in-cgroup"
  start_server --filter="$filter" null "$size"
  NBDKIT="$nbdkit_saved"

  if ! t nbdcopy "$tmpdir/source" "$uri" ||
     ! got="$(t nbdcopy "${flags[@]}" "$uri" - | sha256sum)"; then
    fail "$what: the copy through the overlay failed; OOM kills in the" \
      "cgroup: ${kills_before:-?} before, $(oom_kills) after;" \
      "server alive: $(kill -0 "$server_pid" 2>/dev/null && echo yes || echo no)"
  fi
  [ "$got" = "$want" ] ||
    fail "$what: read back $got, wrote $want"
  kill -0 "$server_pid" 2>/dev/null || fail "$what: the server died"

  # The overlay: an open, unlinked file in $ovl holding the data.
  for fd in /proc/"$server_pid"/fd/*; do
    link="$(readlink "$fd" 2>/dev/null)" || continue
    case "$link" in
      "$ovl"/*" (deleted)") found="$fd" ;;
    esac
  done
  [ -n "$found" ] ||
    fail "$what: no unlinked file of $ovl is open in the server:" \
      "$(ls -l /proc/"$server_pid"/fd/)"
  local on_disk
  on_disk=$(( $(stat -L -c '%b * %B' "$found") ))
  [ "$on_disk" -ge $(( size / 2 )) ] ||
    fail "$what: the overlay file holds only $on_disk bytes on disk"
  [ -z "$(ls -A "$ovl")" ] ||
    fail "$what: names left in TMPDIR: $(ls -A "$ovl")"
  echo "$0: $what: $size bytes read back intact; overlay $(readlink "$found"), $on_disk bytes on disk"

  stop_server
  [ -z "$(ls -A "$ovl")" ] ||
    fail "$what: names left in TMPDIR after exit: $(ls -A "$ovl")"
}

check ours "$NBDKIT" cow
check ours "$NBDKIT" cache
if [ -x /usr/bin/nbdkit ]; then
  check nbdkit /usr/bin/nbdkit cow
  # Debian's cache filter reports the plugin's map unchanged, so the
  # bytes it holds over null's hole would be skipped by nbdcopy (the
  # bug test-cache-filter.sh shows): read every byte instead.
  check nbdkit /usr/bin/nbdkit cache --no-extents
fi
