#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# The nbd plugin's name for the default export (""), side by side with
# Debian's nbdkit 1.32 in front of the same upstream, an eval plugin
# whose default export is called "canon" and whose data is the export
# name it was opened with.  With dynamic-export=true a client asking
# for "" is told the upstream's name, "canon", and gets that export
# (also with uri=, where the client's name must still reach the
# upstream); without it, the configured export= name, or "".
# Catches: "" reported as "" under dynamic-export, the export name
# dropped with uri= and dynamic-export=true.
source "$(dirname "$0")/functions.sh"
source "$srcdir/nbd-plugin-functions.sh"
requires_cmd nbdsh
ref_nbdkit=/usr/bin/nbdkit
requires test -x "$ref_nbdkit"
requires test -f /usr/lib/x86_64-linux-gnu/nbdkit/plugins/nbdkit-nbd-plugin.so

# The upstream: 512 bytes that start with the name the export was
# opened with (its handle).
start_upstream eval default_export='echo canon' \
  list_exports='echo canon; echo other' open='echo "$3"' \
  get_size='echo 512' \
  pread='printf "%-512s" "$2" | dd bs=1 skip=$4 count=$3 status=none'

# The client: the export list, then for "" and "other" the canonical
# name (NBD_OPT_INFO) and the first bytes of what NBD_OPT_GO serves.
cat > "$tmpdir/client.py" <<'PY'
import sys
import nbd
uri = sys.argv[1]
h = nbd.NBD()
h.set_opt_mode(True)
h.connect_uri(uri)
names = []
h.opt_list(lambda n, desc: names.append(n))
h.opt_abort()
print("list %r" % names)
for n in ["", "other"]:
    h = nbd.NBD()
    h.set_opt_mode(True)
    h.set_full_info(True)
    h.connect_uri(uri)
    h.set_export_name(n)
    h.opt_info()
    canon = h.get_canonical_export_name()
    h.opt_go()
    print("%r is %r, serving %r" % (n, canon, bytes(h.pread(6, 0))))
    h.shutdown()
PY

sanity=$(t /usr/bin/python3 "$tmpdir/client.py" "$up_uri")
[ "$(sed -n 2p <<< "$sanity")" = "'' is 'canon', serving b'canon '" ] ||
  fail "the upstream does not behave as this test expects: $sanity"

# both WANT ARGS...: the client through Debian's nbdkit and ours, nbd
# plugin with ARGS; both must print WANT.
both ()
{
  local want="$1" n out
  shift
  for n in "$ref_nbdkit" "$NBDKIT"; do
    out=$(t "$n" -U - nbd "$@" \
            --run "/usr/bin/python3 $tmpdir/client.py \"\$uri\"") ||
      fail "$n nbd $*: the client failed"
    [ "$out" = "$want" ] ||
      fail "$n nbd $*: got
$out
want
$want"
  done
  echo "nbd $*: ok"
}

dynamic="list ['canon', 'other']
'' is 'canon', serving b'canon '
'other' is 'other', serving b'other '"
both "$dynamic" socket="$up_sock" dynamic-export=true
both "$dynamic" uri="$up_uri" dynamic-export=true

# Without dynamic-export every name gets the one configured export, and
# "" is called by the configured name (the upstream is not asked).
both "list ['other']
'' is 'other', serving b'other '
'other' is 'other', serving b'other '" socket="$up_sock" export=other
both "list ['']
'' is '', serving b'canon '
'other' is 'other', serving b'canon '" socket="$up_sock"
