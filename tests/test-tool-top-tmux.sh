#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tools/nbdkit-top in a real terminal: tmux runs it, keys are typed
# with send-keys and what a person would see is read with capture-pane.
#
# Two servers of the same binary, watched with -x BINARY: server 1 on
# a Unix socket, server 2 on 127.0.0.1 with every read held 1 s by the
# delay filter.  Clients: "early" on server 1 connects BEFORE nbdkit-top
# starts; "slow" (5 reads/s), "fast" (about 100 reads/s) and "idle"
# (one read, then nothing) on server 1 and "held" (reads that wait in
# the server) on server 2 connect after.
# What must be on the screen, and what each check would catch:
#  - the column headers (a broken layout or no screen at all);
#  - the early connection's export and peer, and its pid in the PID
#    column, when the binary has the connection_info probe (a top that
#    ignores late attach shows "?"); on a binary without that probe,
#    the "?" row (a top that needs the probe would fail to attach);
#  - rows of both server pids (servers told apart), the TCP peer of
#    "held" and a request in flight on it (the INFL column), and a row
#    with 0 requests for "idle" (a top that drops idle connections);
#  - "fast" above "slow" by requests/s, then "slow" above "fast" after
#    the key i (sort by id): a sort key that does nothing fails;
#  - after "/fast" Enter only the "fast" rows (a filter that keeps
#    others fails), and all rows again after an empty filter;
#  - p: the screen stays the same for 2 s (4 intervals) while "fast"
#    keeps reading, and changes again after the second p;
#  - c splits "fast" into a row per command (read), c again joins them;
#  - + makes the refresh interval 1 s (from -d 0.5), - brings it back;
#  - h shows the help, any key returns to the table;
#  - on 80 columns the rows still show each export and the totals (a
#    layout that puts them beyond column 80 fails);
#  - q ends nbdkit-top with status 0.
source "$(dirname "$0")/functions.sh"
requires_tracer nbdsh python3 tmux

start_server memory 64M
s1="$server_pid"
sock1="$sock"
start_tcp_server --filter=delay memory 64M rdelay=1
s2="$server_pid"

# client NAME URI SECONDS PERIOD: read every PERIOD s for SECONDS s at
# most (it is also killed at exit); touch $tmpdir/NAME once connected.
client ()
{
  nbdsh -u "$2" -c "
import time
end = time.monotonic () + $3
h.pread (512, 0)
open ('$tmpdir/$1', 'w').close ()
while time.monotonic () < end:
    h.pread (4096, 0)
    time.sleep (min ($4, max (0, end - time.monotonic ())))
" 9>&- > /dev/null 2>&1 &
  client_pid=$!
  cleanup_fn _kill_pid "$client_pid"
  wait_for 20 -e "$tmpdir/$1" || fail "client $1 did not connect"
}

client early "nbd+unix:///early?socket=$sock1" 40 0.3
early="$client_pid"

tmux_ ()
{
  tmux -S "$tmpdir/tmux.sock" -f /dev/null "$@"
}
# timeout --foreground keeps nbdkit-top in the terminal's foreground
# process group, where it may read keys.
TERM="${TERM:-xterm}" tmux_ new-session -d -s top -x 200 -y 45 \
  "timeout --foreground -k 5 90 \
     python3 '$abs_top_srcdir/tools/nbdkit-top' -x '$server_binary' -d 0.5 \
     2> '$tmpdir/top.err'; echo nbdkit-top exited \$?; sleep 60" 9>&-
cleanup_fn tmux_ kill-server

screen ()
{
  tmux_ capture-pane -p -t top
}
show_fail ()
{
  echo "--- screen:"; screen; echo "--- stderr:"; cat "$tmpdir/top.err"
  fail "$@"
}
# wait_screen SECONDS CMD...: poll the screen (on stdin of CMD) until
# CMD succeeds, for SECONDS at most.
wait_screen ()
{
  local secs="$1" i
  shift
  for (( i = 0; i < secs * 5; i++ )); do
    screen | "$@" && return 0
    sleep 0.2
  done
  return 1
}
# both A B: the screen has a line matching A and one matching B.
both ()
{
  awk -v a="$1" -v b="$2" '$0 ~ a { x = 1 } $0 ~ b { y = 1 }
                           END { exit !(x && y) }'
}
# above A B: the first connection row matching A is above the first
# one matching B (both present).
above ()
{
  awk -v a="$1" -v b="$2" '
    $1 == "conn" && $0 ~ a && !la { la = NR }
    $1 == "conn" && $0 ~ b && !lb { lb = NR }
    END { exit !(la && lb && la < lb) }'
}

header_re='^KIND +SERVER +CONN +EXPORT +PID +INFL +REQ/s +MiB/s'
header_re+=' +ERR +P50us +P99us +PEER'
wait_screen 30 grep -Eq "$header_re" || show_fail "no column headers"

# The connection made before nbdkit-top started.
if readelf -n "$server_binary" | grep -q 'Name: connection_info$'; then
  wait_screen 10 grep -Eq "^conn +$s1 +1 +\"early\" +$early +.* unix\$" ||
    show_fail "the early connection's export, peer and pid are not shown"
else
  echo "$0: no connection_info probe: the early connection shows ?"
  wait_screen 10 grep -Eq "^conn +$s1 +1 +\\? +- +.* \\?\$" ||
    show_fail "no row for the early connection"
fi

client slow "nbd+unix:///slow?socket=$sock1" 40 0.2
client fast "nbd+unix:///fast?socket=$sock1" 40 0.005
client idle "nbd+unix:///idle?socket=$sock1" 40 40
nbdsh -u "nbd://127.0.0.1:$port/held" -c '
import time
end = time.monotonic () + 40
bufs = [nbd.Buffer (4096) for i in range (4)]
while time.monotonic () < end:
    for b in bufs:
        h.aio_pread (b, 0)
    while h.aio_in_flight () > 0:
        h.poll (-1)
' 9>&- > /dev/null 2>&1 &
cleanup_fn _kill_pid $!

held_re="^conn +$s2 +1 +\"held\" +- +[1-9][0-9]* .* 127\\.0\\.0\\.1:[0-9]+\$"
wait_screen 15 grep -Eq "$held_re" ||
  show_fail "no request in flight on server 2's connection"
screen | grep -Eq "^conn +$s1 +2 " ||
  show_fail "no row for server 1's slow client"
wait_screen 5 grep -Eq "^conn +$s1 +4 +\"idle\" +[-0-9]+ +0 +0\.0 .* unix\$" ||
  show_fail "no row with 0 requests for the idle connection"

# Sort: by requests/s (the default), then by id.
wait_screen 10 above '"fast"' '"slow"' ||
  show_fail "fast is not above slow when sorted by requests/s"
tmux_ send-keys -t top i
wait_screen 5 grep -q 'sort id' || show_fail "the i key did not sort by id"
wait_screen 5 above '"slow"' '"fast"' ||
  show_fail "slow is not above fast when sorted by id"

# Filter.
tmux_ send-keys -t top / f a s t Enter
only_fast ()
{
  awk '$1 == "conn" || $1 == "export" { n++; if ($0 !~ /"fast"/) bad = 1 }
       END { exit !(n >= 2 && !bad) }'
}
wait_screen 5 only_fast || show_fail "the filter fast shows other rows"
tmux_ send-keys -t top / Enter
wait_screen 5 grep -q '"slow"' || show_fail "an empty filter does not show all"

# Pause: the screen freezes while "fast" goes on reading.
tmux_ send-keys -t top p
wait_screen 5 grep -q PAUSED || show_fail "p does not pause"
screen > "$tmpdir/paused1"
sleep 2
screen > "$tmpdir/paused2"
cmp -s "$tmpdir/paused1" "$tmpdir/paused2" ||
  { diff "$tmpdir/paused1" "$tmpdir/paused2"
    fail "the paused screen changed"; }
tmux_ send-keys -t top p
changed () { ! cmp -s - "$tmpdir/paused1"; }
wait_screen 5 changed ||
  show_fail "the screen did not change after the second p"
! screen | grep -q PAUSED || show_fail "still PAUSED after the second p"

# The refresh interval: + adds -d (0.5 s), - takes it away again.  The
# summary line shows the measured length: allow for a loaded machine,
# but not so much that 0.5 s and 1 s overlap.
tmux_ send-keys -t top +
wait_screen 5 both 'every 1s ' ' interval (0\.9[0-9]|1\.[01][0-9])s ' ||
  show_fail "+ did not make the interval 1 s"
tmux_ send-keys -t top -
wait_screen 5 both 'every 0\.5s ' ' interval 0\.(4[0-9]|5[0-9]|6[0-4])s ' ||
  show_fail "- did not bring the interval back to 0.5 s"

# Rows per command, and back.
tmux_ send-keys -t top c
wait_screen 5 grep -Eq '^conn .*"fast" +read ' ||
  show_fail "c shows no read row"
tmux_ send-keys -t top c
joined ()
{
  awk '/^conn .*"fast"/ { fast = 1 } /"fast" +(all|read) / { bycmd = 1 }
       END { exit !(fast && !bycmd) }'
}
wait_screen 5 joined || show_fail "c does not join the rows"

# Help, and back.
tmux_ send-keys -t top h
wait_screen 5 grep -q '^nbdkit-top keys' || show_fail "h shows no help"
tmux_ send-keys -t top x
wait_screen 5 grep -q '^KIND ' || show_fail "a key does not leave the help"

# An 80-column terminal: the export of each row is still in view, and
# so are the totals (a summary wider than 80 columns is cut short).
tmux_ resize-window -t top -x 80 -y 30
narrow ()
{
  awk 'length > 80 { wide = 1 } /^conn +[0-9]+ +3 +"fast" / { fast = 1 }
       /^req\/s [0-9.]+  MiB\/s [0-9.]+  errors [0-9]+  in flight [0-9]+$/ {
         totals = 1 }
       END { exit !(fast && totals && !wide) }'
}
wait_screen 5 narrow ||
  show_fail "on 80 columns the export or the totals are not shown"

# Quit.
tmux_ send-keys -t top q
wait_screen 15 grep -q '^nbdkit-top exited 0' ||
  show_fail "q did not end nbdkit-top"
