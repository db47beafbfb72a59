#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --filter=ip admits or refuses real clients by the rules of nbdkit
# 1.32: over a Unix socket by uid:, gid:, pid: and anyunix; over TCP
# on 127.0.0.1 and ::1 by address, CIDR range and allipv4/allipv6;
# allow= is tried before deny= whatever their order; a refused client
# gets no export and the server names the rule.  Debian's nbdkit with
# its own ip filter takes the same decision on the same Unix-socket
# rules.  Bad rules stop the server with one line naming the parameter.
source "$(dirname "$0")/functions.sh"
requires_cmd nbdinfo

uid="$(id -u)"
gid="$(id -g)"
other_uid=$(( uid + 4242 ))
other_gid=$(( gid + 4242 ))

# run_with SERVER... -- : one nbdinfo through the server in captive mode;
# prints "ok" or "refused(RULE)" (the rule the server's error names).
run_with ()
{
  local log="$tmpdir/log"
  if t "$@" --run 'nbdinfo --size "$uri"' > "$log" 2>&1; then
    grep -qx 1048576 "$log" || { cat "$log"; fail "no size from $*"; }
    echo ok
  elif grep -q 'refused by ' "$log"; then
    echo "refused($(sed -n 's/.*refused by \(.*\)/\1/p' "$log" | head -1))"
  else
    cat "$log"
    fail "$* failed, but not by the ip filter"
  fi
}

# expect WANT TRANSPORT RULES...: TRANSPORT is unix, ipv4 or ipv6.
expect ()
{
  local want="$1" transport="$2" got
  shift 2
  case "$transport" in
    unix) got="$(run_with "$NBDKIT" -U - --filter=ip memory 1M "$@")" ;;
    ipv4) got="$(run_with "$NBDKIT" -i 127.0.0.1 -p "$(free_port)" \
                   --filter=ip memory 1M "$@")" ;;
    ipv6) got="$(run_with "$NBDKIT" -i ::1 -p "$(free_port)" \
                   --filter=ip memory 1M "$@")" ;;
  esac
  [ "$got" = "$want" ] ||
    fail "$transport $*: expected $want, got $got"
  echo "$transport $*: $got"
}

# --- Unix socket: credentials ---------------------------------------------
expect ok unix
expect ok unix allow=uid:$uid deny=all
expect "refused(deny=all)" unix allow=uid:$other_uid deny=all
expect ok unix allow=gid:$gid deny=all
expect "refused(deny=all)" unix allow=gid:$other_gid deny=all
expect "refused(deny=uid:$uid)" unix deny=uid:$other_uid,uid:$uid
expect "refused(deny=gid:$gid)" unix deny=gid:$gid
expect ok unix deny=uid:$other_uid,gid:$other_gid
# pid 1 is never our client.
expect "refused(deny=anyunix)" unix allow=pid:1 deny=anyunix
expect "refused(deny=allunix)" unix deny=allunix
# Address rules do not match a Unix client.
expect ok unix deny=allipv4,allipv6,127.0.0.1,::1,0.0.0.0/0,::/0,anyvsock
expect ok unix deny=vsock-cid:2,vsock-port:1
# Allow is tried first, whatever the order on the command line.
expect ok unix deny=all allow=uid:$uid
expect ok unix deny=any allow=anyunix
# Lists add up over several parameters.
expect "refused(deny=gid:$gid)" unix deny=uid:$other_uid deny=gid:$gid
# This kernel may have no security module, so no labels; a label rule
# then never matches (and with a label, it is not this made-up one).
expect ok unix deny=security:no_such_label_t
expect "refused(deny=all)" unix allow=security:no_such_label_t deny=all

# --- TCP on 127.0.0.1 -----------------------------------------------------
expect ok ipv4 allow=127.0.0.1 deny=all
expect "refused(deny=127.0.0.1)" ipv4 deny=127.0.0.1
expect "refused(deny=127.0.0.0/8)" ipv4 deny=10.0.0.0/8,127.0.0.0/8
expect "refused(deny=127.0.255.255/9)" ipv4 deny=127.255.255.255/9,127.0.255.255/9
expect ok ipv4 deny=127.0.0.2,128.0.0.0/1,127.0.0.0/32,::1,anyunix,uid:$uid
expect "refused(deny=allipv4)" ipv4 deny=allipv4
expect "refused(deny=0.0.0.0/0)" ipv4 deny=0.0.0.0/0
expect ok ipv4 deny=allipv6
expect ok ipv4 allow=0.0.0.0/0 deny=all

# --- TCP on ::1 -----------------------------------------------------------
if t "$NBDKIT" -i ::1 -p "$(free_port)" memory 1M \
     --run 'nbdinfo --size "$uri"' > /dev/null 2>&1; then
  expect ok ipv6 allow=::1 deny=all
  expect "refused(deny=::1)" ipv6 deny=::1
  expect "refused(deny=::/0)" ipv6 deny=127.0.0.1,::/0
  expect "refused(deny=0:0:0:0:0:0:0:0/127)" ipv6 deny=0:0:0:0:0:0:0:0/127
  expect ok ipv6 deny=::2,::/128,fe80::/10,allipv4,127.0.0.1
  expect "refused(deny=anyipv6)" ipv6 deny=anyipv6
  expect "refused(deny=all)" ipv6 allow=127.0.0.1 deny=all
else
  echo "$0: no IPv6 on loopback here: ::1 cases skipped"
fi

# --- The same decisions as Debian's nbdkit ---------------------------------
if [ -x /usr/bin/nbdkit ] &&
   [ -f /usr/lib/x86_64-linux-gnu/nbdkit/filters/nbdkit-ip-filter.so ]; then
  for rules in "allow=uid:$uid deny=all" "allow=uid:$other_uid deny=all" \
               "deny=gid:$gid" "deny=all allow=gid:$gid" "deny=anyunix" \
               "deny=allipv4,allipv6" "allow=pid:1 deny=all" ""; do
    # shellcheck disable=SC2086
    ours="$(t "$NBDKIT" -U - --filter=ip memory 1M $rules \
              --run 'nbdinfo --size "$uri"' 2>/dev/null || echo refused)"
    # shellcheck disable=SC2086
    ref="$(t /usr/bin/nbdkit -U - --filter=ip memory 1M $rules \
              --run 'nbdinfo --size "$uri"' 2>/dev/null || echo refused)"
    [ "$ours" = "$ref" ] ||
      fail "rules '$rules': ours says $ours, Debian's nbdkit says $ref"
  done
  echo "Debian's nbdkit agrees on the Unix-socket rules"
fi

# --- Bad rules: one line naming the parameter, exit 1 ----------------------
for bad in allow=foo allow=1.2.3.4/33 deny=::1/129 allow=uid:abc \
           deny=gid:-1 allow=pid: allow=127.0.0.1,,::1 deny=, \
           deny=security: deny=10.0.0.0/x allow=vsock-cid:99999999999; do
  refuses "ip: error: ${bad%%=*}: " --filter=ip null "$bad" ||
    fail "$bad: not refused with one line naming ${bad%%=*}"
done
echo "bad rules refused"
