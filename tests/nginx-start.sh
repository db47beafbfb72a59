# SPDX-License-Identifier: BSD-3-Clause (see LICENSE)
# tests/nginx-start.sh: start a private nginx for a test (the curl
# plugin's tests source it after functions.sh).
#
#   start_nginx DIR LISTEN BODY [HTTP]
#
# writes DIR/nginx.conf and runs nginx in the foreground (daemon off,
# master_process off: one process, whose pid the test knows) with DIR
# as its prefix, so nothing outside DIR is touched.  LISTEN is what
# follows "listen" (127.0.0.1:PORT, or unix:PATH), BODY the rest of the
# server { } block (root, locations), HTTP extra lines for the http { }
# block.  Every request is logged to DIR/access.log, one line each, in
# the format "curltest":
#
#   METHOD URI status=S range="R" cookie="C" x_test="X" ua="A" user="U"
#     tls="PROTOCOL CIPHER" pauth="PROXY-AUTHORIZATION"
#
# so a test can check what reached the server.  Waits (bounded) until
# nginx has written its pid file, which it does once it listens; sets
# $nginx_pid; stops it (by pid) at exit.  Needs nginx on $PATH (Debian's
# nginx-light) or in /usr/sbin.

nginx_pid=

start_nginx ()
{
  local dir="$1" listen="$2" body="$3" http="${4:-}" nginx i
  nginx="$(command -v nginx || echo /usr/sbin/nginx)"
  [ -x "$nginx" ] || { echo "$0: SKIP: nginx not found"; exit 77; }
  mkdir -p "$dir/tmp"
  cat > "$dir/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log info;
events { worker_connections 256; }
http {
  client_body_temp_path $dir/tmp/body;
  proxy_temp_path $dir/tmp/proxy;
  fastcgi_temp_path $dir/tmp/fastcgi;
  uwsgi_temp_path $dir/tmp/uwsgi;
  scgi_temp_path $dir/tmp/scgi;
  default_type application/octet-stream;
  log_format curltest '\$request_method \$uri status=\$status range="\$http_range" cookie="\$http_cookie" x_test="\$http_x_test" ua="\$http_user_agent" user="\$remote_user" tls="\$ssl_protocol \$ssl_cipher" pauth="\$http_proxy_authorization"';
  access_log $dir/access.log curltest;
  $http
  server {
    listen $listen;
    $body
  }
}
EOF
  rm -f "$dir/nginx.pid"
  timeout -k 5 300 "$nginx" -p "$dir" -c "$dir/nginx.conf" \
    -e "$dir/error.log" 9>&- &
  nginx_pid=$!
  cleanup_fn _kill_pid "$nginx_pid"
  for (( i = 0; i < 200; i++ )); do
    [ -s "$dir/nginx.pid" ] && return 0
    kill -0 "$nginx_pid" 2>/dev/null || break
    sleep 0.1
  done
  cat "$dir/error.log" >&2 || :
  fail "nginx did not start (config $dir/nginx.conf)"
}
