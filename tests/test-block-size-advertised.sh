#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# NBD_INFO_BLOCK_SIZE as nbdkit sends it: only when a plugin or filter
# gives block sizes, with the values as given (the blocksize filter's
# maximum of 4294967295, a maximum above 32 MiB), and only to a client
# that asks for it.  nbdinfo --json under ours and under Debian's
# nbdkit must agree.  (The server used to advertise 1/4096/32M for
# every export, and to lower any maximum above 32 MiB to 32 MiB.)
source "$(dirname "$0")/functions.sh"
requires test -x /usr/bin/python3
requires_cmd nbdinfo

# sizes SERVER ARGS...: "min pref max" as nbdinfo --json shows them, or
# "none".
sizes ()
{
  local server="$1"
  shift
  t "$server" -U - "$@" --run 'nbdinfo --json "$uri"' |
    /usr/bin/python3 -c '
import json, sys
e = json.load(sys.stdin)["exports"][0]
if "block_size_minimum" in e:
    print(e["block_size_minimum"], e["block_size_preferred"],
          e["block_size_maximum"])
else:
    print("none")'
}

eval_bs=(eval get_size='echo 1M' pread='head -c $3 /dev/zero')
cases=(
  "none|memory 1M"
  "none|${eval_bs[*]@Q} block_size='echo 0 0 0'"
  "1 4096 4294967295|--filter=blocksize memory 1M"
  "1 65536 4294967295|--filter=blocksize memory 1M minblock=64K"
  "1 4096 67108864|--filter=blocksize-policy memory 1M blocksize-maximum=64M"
  "1 4096 4294967295|--filter=blocksize-policy memory 1M blocksize-maximum=4294967295"
  "1 32768 4294967295|--filter=blocksize-policy memory 1M blocksize-preferred=32K"
  "512 4096 67108864|${eval_bs[*]@Q} block_size='echo 512 4096 64M'"
  "1 512 1000|${eval_bs[*]@Q} block_size='echo 1 512 1000'"
)
for c in "${cases[@]}"; do
  want="${c%%|*}"
  eval "args=(${c#*|})"
  got="$(sizes "$NBDKIT" "${args[@]}")"
  echo "${args[*]}: $got"
  [ "$got" = "$want" ] || fail "${args[*]}: block sizes '$got', want '$want'"
  if [ -x /usr/bin/nbdkit ]; then
    ref="$(sizes /usr/bin/nbdkit "${args[@]}")"
    [ "$ref" = "$want" ] ||
      fail "${args[*]}: Debian's nbdkit says '$ref' (fix the test)"
  fi
done

# On the wire: NBD_OPT_INFO and NBD_OPT_GO send NBD_INFO_BLOCK_SIZE only
# when asked for, after NBD_INFO_EXPORT.
cat > "$tmpdir/raw.py" <<'PY'
import importlib.util, struct, sys
spec = importlib.util.spec_from_file_location("hc", sys.argv[1])
hc = importlib.util.module_from_spec(spec)
spec.loader.exec_module(hc)
for opt in (hc.OPT_INFO, hc.OPT_GO):
    for infos in ((), (hc.INFO_BLOCK_SIZE,)):
        c = hc.Conn(sys.argv[2])
        c.greet()
        rtype, replies = c.option(opt, c.go_data(b"", infos))
        got = []
        for t, d in replies:
            info, = struct.unpack(">H", d[:2])
            got.append(str(struct.unpack(">HIII", d)[1:]) if info == 3
                       else "info %d" % info)
        print("option %d asking %d: %s" % (opt, len(infos), ", ".join(got)))
        c.close()
PY
raw ()
{
  start_server --filter=blocksize-policy memory 1M blocksize-maximum=1M
  t /usr/bin/python3 "$tmpdir/raw.py" "$srcdir/hostile-client.py" "$sock" > "$1" ||
    fail "the raw client failed against $NBDKIT"
  stop_server
  cat "$1"
}
cat > "$tmpdir/raw.expected" <<'EOF'
option 6 asking 0: info 0
option 6 asking 1: info 0, (1, 4096, 1048576)
option 7 asking 0: info 0
option 7 asking 1: info 0, (1, 4096, 1048576)
EOF
raw "$tmpdir/raw.ours"
diff -u "$tmpdir/raw.expected" "$tmpdir/raw.ours" ||
  fail "NBD_INFO_BLOCK_SIZE sent otherwise than asked"
if [ -x /usr/bin/nbdkit ]; then
  NBDKIT=/usr/bin/nbdkit raw "$tmpdir/raw.ref"
  diff -u "$tmpdir/raw.ref" "$tmpdir/raw.ours" || fail "ours differs from nbdkit"
fi
