#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# Every option of nbdkit 1.32's nbdkit(1) is accepted: for each long
# and short option Debian's nbdkit lists (--long-options,
# --short-options), a command line using it must run to completion.
# What each option does is checked by the tests named in the table's
# comments; an option missing from the table fails the test, so a new
# nbdkit option cannot slip by.
source "$(dirname "$0")/functions.sh"
requires_cmd psktool certtool

psktool -u alice -p "$tmpdir/keys.psk" > /dev/null
port="$(free_port)"
vsock=no
python3 -c 'import socket; socket.socket(socket.AF_VSOCK)' 2>/dev/null &&
  vsock=yes

# The arguments that exercise OPT (a long option without its "--", or
# a short option's letter); the plugin and --run are added unless the
# line says "alone".
args_for ()
{
  case "$1" in
    ipv4-only|4|ipv6-only|6) echo "-p $port OPT" ;;     # test-options-network
    debug|D)          echo "-U - OPT nbdkit.backend.datapath=0" ;;
                                                    # test-debug-server-flags
    dump-config)      echo "alone OPT" ;;              # test-dump-config
    dump-plugin)      echo "alone OPT memory" ;;       # test-dump-plugin
    exit-with-parent) echo "-U - OPT" ;;
    export|export-name|exportname|e) echo "-U - OPT foo" ;;  # test-exportname
    filter)           echo "-U - OPT offset" ;;        # test-offset-filter
    foreground|no-fork|f) echo "-U - OPT" ;;
    group|g)          echo "-U - OPT $(id -g)" ;;      # test-user-group
    help)             echo "alone OPT" ;;              # test-help
    ip-addr|ipaddr|i) echo "-p $port OPT 127.0.0.1" ;; # test-options-network
    log)              echo "-U - OPT stderr" ;;        # test-options-misc
    mask-handshake)   echo "-U - OPT 1" ;;             # test-options-network
    new-style|newstyle|n|old-style|oldstyle|o) echo "-U - OPT" ;;
    no-sr)            echo "-U - OPT" ;;               # test-structured-replies
    pid-file|pidfile|P) echo "-U - OPT $tmpdir/pid" ;; # test-pidfile
    port|p)           echo "OPT $port" ;;              # test-tcp
    read-only|readonly|r) echo "-U - OPT" ;;           # test-read-only
    run)              echo "-U -" ;;                   # test-captive-*
    selinux-label)    echo "stdin -s OPT=x" ;;         # test-options-misc
    single|stdin|s)   echo "stdin OPT" ;;              # test-single
    swap)             echo "-U - OPT -t 1" ;;          # test-options-misc
    threads|t)        echo "-U - OPT 4" ;;             # test-option-numbers
    tls)              echo "-U - OPT off" ;;           # test-tls-*
    tls-psk)          echo "-U - --tls=on OPT $tmpdir/keys.psk" ;;
    tls-certificates) echo "-U - --tls=on OPT $tmpdir/tls/server" ;;
    tls-verify-peer)  echo "-U - --tls=on --tls-certificates $tmpdir/tls/server OPT" ;;
    unix|U)           echo "OPT $tmpdir/sock" ;;
    user|u)           echo "-U - OPT $(id -u)" ;;      # test-user-group
    verbose|v)        echo "-U - OPT" ;;               # test-verbose
    version|V)        echo "alone OPT" ;;              # test-version
    vsock)            if [ $vsock = yes ]; then echo "OPT -p $port"
                      else echo "alone --help"; fi ;;  # test-options-network
    *) return 1 ;;
  esac
}
t "$srcdir/make-tls-files.sh" "$tmpdir/tls"

try ()
{
  local opt="$1" a
  a="$(args_for "$opt")" || fail "option $opt of nbdkit(1) is not in this test"
  # Long options are written --name, short ones -X.
  if [ ${#opt} -gt 1 ]; then a="${a/OPT/--$opt}"; else a="${a/OPT/-$opt}"; fi
  set -- $a
  case "$1" in
    alone) shift; t "$NBDKIT" "$@" > /dev/null ;;
    stdin) shift; t "$NBDKIT" "$@" memory 1M < /dev/null > /dev/null ;;
    *) t "$NBDKIT" "$@" memory 1M --run 'true' ;;
  esac || fail "nbdkit(1) option $opt was refused: $a"
}

for o in $(/usr/bin/nbdkit --long-options | sed 's/^--//'); do
  [ "$o" = long-options ] || [ "$o" = short-options ] || try "$o"
done
for o in $(/usr/bin/nbdkit --short-options | sed 's/^-//'); do
  try "$o"
done
# Both listing options are themselves accepted.
t "$NBDKIT" --long-options > /dev/null
t "$NBDKIT" --short-options > /dev/null
