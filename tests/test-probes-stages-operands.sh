#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# No probe site of the server passes a literal (an immediate operand,
# "N@$VALUE" in the note's Arguments): perf drops such an argument (it
# showed busy_poll's "caught" as missing), and a probe whose sites
# disagree is refused.  Checked for every site of every probe, and
# busy_poll's sites (two: window ran out, input came) by name, each
# with its three arguments.  Would catch: a literal or a constant cast
# passed straight to a probe macro instead of through probe_u64.
source "$(dirname "$0")/functions.sh"
requires_cmd readelf
requires grep -q '^#define ENABLE_PROBES 1' "$abs_top_builddir/config.h"

readelf -n "$server_binary" > "$tmpdir/notes"
awk '/^ *Name: / { name = $2 }
     /^ *Arguments:/ && /@\$/ { print name ": " $0; bad = 1 }
     END { exit bad }' "$tmpdir/notes" ||
  fail "a probe site passes a literal operand"

awk '/^ *Name: / { name = $2 }
     /^ *Arguments:/ && name == "busy_poll" { print; n++
                                              if (NF != 4) bad = 1 }
     END { exit !(n == 2 && !bad) }' "$tmpdir/notes" ||
  fail "busy_poll should have two sites of three register or memory operands"
