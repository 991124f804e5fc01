# Sourced by scripts/cluster-test.sh and scripts/bench-cluster.sh: a private PostgreSQL in a
# work directory and nginx in front of navd nodes with deploy/nginx.conf, on loopback only.
# Callers set `work` (a directory they own) and call cluster_cleanup on exit.

# The newest PostgreSQL server programs, and how to run them (PostgreSQL refuses root: as
# root, its programs run as the postgres user).
cluster_prepare() {
  scripts/system-packages.sh --cluster
  pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [[ -x $pg_bin/initdb ]] || { echo "no PostgreSQL server programs in /usr/lib/postgresql" >&2; exit 1; }
  chmod 755 "$work"
  as_postgres=()
  if [[ $(id -u) -eq 0 ]]; then
    as_postgres=(runuser -u postgres --)
    install -d -o postgres -g postgres "$work/pg"
  else
    mkdir -p "$work/pg"
  fi
}

# Prints N free loopback ports.
cluster_ports() {
  python3 -c '
import socket, sys
sockets = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in sockets: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in sockets])' "$1"
}

# cluster_start_postgres PORT: a fresh cluster with a database navd (user navd, trust on loopback).
cluster_start_postgres() {
  "${as_postgres[@]}" "$pg_bin/initdb" -D "$work/pg/data" -A trust -U navd --no-sync -E UTF8 --locale C >"$work/initdb.log" 2>&1 \
    || { cat "$work/initdb.log" >&2; exit 1; }
  "${as_postgres[@]}" "$pg_bin/pg_ctl" -D "$work/pg/data" -l "$work/pg/postgres.log" -w -t 30 \
    -o "-c listen_addresses=127.0.0.1 -p $1 -k $work/pg" start >/dev/null \
    || { cat "$work/pg/postgres.log" >&2; exit 1; }
  "${as_postgres[@]}" "$pg_bin/createdb" -h 127.0.0.1 -p "$1" -U navd navd
}

# cluster_start_nginx NGINX_PORT NODE_PORT...: deploy/nginx.conf itself, with only the nodes'
# addresses (navd1:8080… become the given ports; upstream lines past them are dropped), its
# listen address and its paths (under $work) rewritten.
cluster_start_nginx() {
  local listen=$1 index=1 edits=()
  shift
  for index in 1 2 3; do
    if [[ $index -le $# ]]; then
      edits+=(-e "s/navd$index:8080/127.0.0.1:${!index}/")
    else
      edits+=(-e "/server navd$index:8080/d")
    fi
  done
  mkdir -p "$work/nginx"
  sed "${edits[@]}" -e "s/listen 8080;/listen 127.0.0.1:$listen;/" \
      -e "s|^http {|http {\n    client_body_temp_path $work/nginx/body;\n    proxy_temp_path $work/nginx/proxy;\n    fastcgi_temp_path $work/nginx/fastcgi;\n    uwsgi_temp_path $work/nginx/uwsgi;\n    scgi_temp_path $work/nginx/scgi;|" \
      deploy/nginx.conf >"$work/nginx.conf"
  grep -q "127.0.0.1:${!#}" "$work/nginx.conf" || { echo "deploy/nginx.conf no longer names navd1:8080 … navd3:8080" >&2; exit 1; }
  nginx -p "$work/nginx" -c "$work/nginx.conf" -g "pid $work/nginx.pid; error_log $work/nginx/error.log warn;" -t -q
  nginx -p "$work/nginx" -c "$work/nginx.conf" -g "pid $work/nginx.pid; error_log $work/nginx/error.log warn;"
}

cluster_stop_nginx() {
  if [[ -f $work/nginx.pid ]]; then
    local pid
    pid=$(cat "$work/nginx.pid")
    kill -QUIT "$pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    rm -f "$work/nginx.pid"
  fi
}

# Stops what was started here, by its recorded pid: navd nodes (navd*.pid), nginx, PostgreSQL.
cluster_cleanup() {
  for pid_file in "$work"/navd*.pid; do
    [[ -f $pid_file ]] && kill -9 "$(cat "$pid_file")" 2>/dev/null || true
  done
  cluster_stop_nginx
  [[ -n ${pg_bin:-} ]] && "${as_postgres[@]}" "$pg_bin/pg_ctl" -D "$work/pg/data" -m immediate stop >/dev/null 2>&1 || true
}
