# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/sshd-start.sh: a private OpenSSH server for the ssh plugin's
# tests, sourced after functions.sh.  It is also the way to try the
# plugin by hand: source functions.sh and this file from bash as root,
# call start_sshd, then run nbdkit ssh with the printed parameters.
#
#   start_sshd [password]   start /usr/sbin/sshd on a free port of
#                           127.0.0.1, stopped by PID at exit.  With
#                           "password", root may also log in with the
#                           password $sshd_password (see below).
#   kill_sshd               kill -9 sshd and every session it forked
#   launch_sshd             start it again: same port, keys, config
#   start_ssh_server ARGS   start_server, then stop_ssh_server: stop it
#   stop_ssh_server         once its connection threads have ended
#
# Sets:
#   $sshd_dir        its files, in $tmpdir/sshd
#   $sshd_port       the port
#   $sshd_pid        the pid of the listening sshd
#   $sshd_key        a client private key that root may log in with
#   $sshd_known_hosts  a known hosts file holding its host key
#   $sshd_args       host= port= user= identity= known-hosts= for
#                    nbdkit ssh, an array
#
# The server has its own host key, its own sshd_config (StrictModes
# off, no PAM, keys only from $sshd_dir/authorized_keys) and logs to
# $sshd_dir/sshd.log.  It needs root: sshd's privilege separation
# wants /run/sshd, which is created if missing.
#
# Passwords: root's real password is never touched.  sshd checks a
# password against /etc/shadow, so with "password" sshd runs in a
# mount namespace of its own where a copy of /etc/shadow, with a known
# password for root, is mounted over the real one; nothing outside
# that sshd sees the copy, and it goes when sshd exits.

sshd_password=nbdkit-ssh-test-password

start_sshd ()
{
  local mode="${1:-}"
  requires_root
  requires_cmd /usr/sbin/sshd ssh-keygen
  sshd_dir="$tmpdir/sshd"
  mkdir -p "$sshd_dir" /run/sshd
  ssh-keygen -q -t ed25519 -N '' -C test-host -f "$sshd_dir/host_key"
  ssh-keygen -q -t ed25519 -N '' -C test-client -f "$sshd_dir/id_ed25519"
  cp "$sshd_dir/id_ed25519.pub" "$sshd_dir/authorized_keys"
  sshd_key="$sshd_dir/id_ed25519"
  sshd_port="$(free_port)"
  cat > "$sshd_dir/sshd_config" <<EOF
ListenAddress 127.0.0.1
Port $sshd_port
HostKey $sshd_dir/host_key
PidFile $sshd_dir/sshd.pid
AuthorizedKeysFile $sshd_dir/authorized_keys
StrictModes no
UsePAM no
PermitRootLogin yes
PubkeyAuthentication yes
PasswordAuthentication $([ "$mode" = password ] && echo yes || echo no)
KbdInteractiveAuthentication no
MaxStartups 100
Subsystem sftp internal-sftp
LogLevel VERBOSE
EOF
  echo "[127.0.0.1]:$sshd_port $(cat "$sshd_dir/host_key.pub")" \
    > "$sshd_dir/known_hosts"
  sshd_known_hosts="$sshd_dir/known_hosts"

  sshd_mode="$mode"
  launch_sshd
  sshd_args=(host=127.0.0.1 port="$sshd_port" user=root
             identity="$sshd_key" known-hosts="$sshd_known_hosts"
             config=)
}

# launch_sshd: (re)start the sshd that start_sshd set up, with the
# same port, keys and config (after kill_sshd, say).
launch_sshd ()
{
  local -a cmd=(/usr/sbin/sshd -D -e -f "$sshd_dir/sshd_config")
  if [ "$sshd_mode" = password ]; then
    requires_cmd unshare openssl
    local hash
    hash="$(openssl passwd -6 "$sshd_password")"
    awk -F: -v OFS=: -v h="$hash" '$1 == "root" { $2 = h } { print }' \
      /etc/shadow > "$sshd_dir/shadow"
    chmod 600 "$sshd_dir/shadow"
    # exec keeps the pid: $sshd_pid is sshd itself.
    cmd=(unshare -m --propagation private sh -c \
         'mount --bind "$1" /etc/shadow && shift && exec "$@"' \
         sh "$sshd_dir/shadow" "${cmd[@]}")
  fi
  "${cmd[@]}" 2> "$sshd_dir/sshd.log" 9>&- &
  sshd_pid=$!
  cleanup_fn _kill_pid "$sshd_pid"
  # A loaded machine has taken over 10 s: allow 30.
  local deadline=$(( SECONDS + 30 ))
  until grep -qs "Server listening" "$sshd_dir/sshd.log"; do
    kill -0 "$sshd_pid" 2>/dev/null ||
      { cat "$sshd_dir/sshd.log"; fail "sshd exited at start-up"; }
    (( SECONDS < deadline )) ||
      { cat "$sshd_dir/sshd.log"; fail "sshd did not listen within 30 s"; }
    sleep 0.1
  done
}

# kill_sshd: kill -9 the sshd and all its descendants (the sessions
# serving clients, and their SFTP servers), by pid, as a crashed or
# rebooted server would vanish.
kill_sshd ()
{
  local pids=("$sshd_pid") p all=()
  while [ ${#pids[@]} -gt 0 ]; do
    all+=("${pids[@]}")
    p="$(printf '%s,' "${pids[@]}")"
    mapfile -t pids < <(pgrep -P "${p%,}" || :)
  done
  kill -9 "${all[@]}" 2>/dev/null || :
  wait "$sshd_pid" 2>/dev/null || :
}

# start_ssh_server ARGS...: start_server ARGS (the ssh plugin's command
# line), noting how many threads the idle server runs.
start_ssh_server ()
{
  start_server "$@"
  server_idle_threads=$(ls "/proc/$server_pid/task" | wc -l)
}

# stop_ssh_server: stop_server, but first wait (up to 10 s) until the
# connection threads have ended: the threads left are the idle ones and
# the plugin's watchdog.  The server does not join connection threads
# at exit, and one still ending then leaves OpenSSL's per-thread random
# generator (made by libssh's key exchange and packet padding) unfreed,
# which LeakSanitizer reports as a leak in libcrypto.
stop_ssh_server ()
{
  local deadline=$(( SECONDS + 10 ))
  while [ -d "/proc/$server_pid/task" ] &&
        [ "$(ls "/proc/$server_pid/task" | wc -l)" -gt \
          $(( server_idle_threads + 1 )) ] &&
        (( SECONDS < deadline )); do
    sleep 0.1
  done
  stop_server
}
