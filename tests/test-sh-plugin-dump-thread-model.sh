#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# --dump-plugin's thread_model for the sh and eval plugins: "parallel"
# for the sh plugin without a script (what the plugin itself allows, as
# nbdkit says; tools read it to decide whether parallel requests are
# possible), "serialize_all_requests" for a script or eval fragments
# that do not implement thread_model (nbdkit-sh-plugin(3)), and their
# own choice otherwise.  Debian's nbdkit must say the same.
source "$(dirname "$0")/functions.sh"

servers=("$NBDKIT")
[ -x /usr/bin/nbdkit ] && servers+=(/usr/bin/nbdkit)
cat > "$tmpdir/s.sh" <<'SH'
#!/bin/sh
case "$1" in get_size) echo 1M ;; *) exit 2 ;; esac
SH
chmod +x "$tmpdir/s.sh"

model ()
{
  "$@" --dump-plugin | sed -n 's/^thread_model=//p'
}
cat > "$tmpdir/par.sh" <<'SH'
#!/bin/sh
case "$1" in thread_model) echo parallel ;; *) exit 2 ;; esac
SH
chmod +x "$tmpdir/par.sh"
for server in "${servers[@]}"; do
  [ "$(model "$server" sh)" = parallel ] ||
    fail "$server --dump-plugin sh: not parallel"
  [ "$(model "$server" sh "$tmpdir/s.sh")" = serialize_all_requests ] ||
    fail "$server: a script without thread_model is not serialized"
  [ "$(model "$server" sh "$tmpdir/par.sh")" = parallel ] ||
    fail "$server: a script that says parallel is not parallel"
  [ "$(model "$server" eval)" = serialize_all_requests ] ||
    fail "$server --dump-plugin eval: not serialize_all_requests"
  [ "$(model "$server" eval thread_model='echo parallel')" = parallel ] ||
    fail "$server: eval thread_model=parallel is not parallel"
done
