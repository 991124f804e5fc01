#!/usr/bin/env bash
# Cluster test without containers: a private PostgreSQL in a temporary directory, three navd on
# loopback ports sharing it, and nginx in front with deploy/nginx.conf (only its upstream
# addresses, listen address and paths rewritten). scripts/cluster_test.py sends actions through
# nginx while subscribers follow every session, kills one node with -9, checks that every
# session answers again and every stream resumes with nothing lost, restarts the node and checks
# that its share of the sessions (about a third) moves back. About 30 s; bounded at 120 s.
#
#   scripts/cluster-test.sh                 (NAVD_BINARY: default, a debug build of navd)
#
# Installs the Debian packages postgresql and nginx when missing. PostgreSQL refuses to run as
# root: as root, its programs run as the postgres user (runuser). Everything listens on
# 127.0.0.1 only. NAVD_CLUSTER_KEEP=1 keeps the work directory (logs of every process).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/system-packages.sh --cluster
if [[ -n ${NAVD_BINARY:-} ]]; then
  navd=$NAVD_BINARY
else
  swift build --product navd
  navd="$(swift build --show-bin-path)/navd"
fi
[[ -x $navd ]] || { echo "cluster-test: no navd binary at $navd" >&2; exit 1; }
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
[[ -x $pg_bin/initdb ]] || { echo "cluster-test: no PostgreSQL server programs in /usr/lib/postgresql" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/navd-cluster.XXXXXX")
chmod 755 "$work"
as_postgres=()
if [[ $(id -u) -eq 0 ]]; then
  as_postgres=(runuser -u postgres --)
  install -d -o postgres -g postgres "$work/pg"
else
  mkdir "$work/pg"
fi
cleanup() {
  # The driver stops its nodes itself; this covers the driver being killed first.
  for pid_file in "$work"/navd*.pid; do
    [[ -f $pid_file ]] && kill -9 "$(cat "$pid_file")" 2>/dev/null || true
  done
  if [[ -f $work/nginx.pid ]]; then kill -QUIT "$(cat "$work/nginx.pid")" 2>/dev/null || true; fi
  "${as_postgres[@]}" "$pg_bin/pg_ctl" -D "$work/pg/data" -m immediate stop >/dev/null 2>&1 || true
  if [[ ${NAVD_CLUSTER_KEEP:-0} == 1 ]]; then echo "cluster-test: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT

# Free loopback ports: one for PostgreSQL, three for the nodes, one for nginx.
read -r pg_port port1 port2 port3 nginx_port < <(python3 -c '
import socket
sockets = [socket.socket() for _ in range(5)]
for s in sockets: s.bind(("127.0.0.1", 0))
print(*[s.getsockname()[1] for s in sockets])')

"${as_postgres[@]}" "$pg_bin/initdb" -D "$work/pg/data" -A trust -U navd --no-sync -E UTF8 --locale C >"$work/initdb.log" 2>&1 \
  || { cat "$work/initdb.log" >&2; exit 1; }
"${as_postgres[@]}" "$pg_bin/pg_ctl" -D "$work/pg/data" -l "$work/pg/postgres.log" -w -t 30 \
  -o "-c listen_addresses=127.0.0.1 -p $pg_port -k $work/pg" start >/dev/null \
  || { cat "$work/pg/postgres.log" >&2; exit 1; }
"${as_postgres[@]}" "$pg_bin/createdb" -h 127.0.0.1 -p "$pg_port" -U navd navd

# deploy/nginx.conf itself: the nodes' addresses and nginx's own, and its paths under $work.
mkdir -p "$work/nginx"
sed -e "s/navd1:8080/127.0.0.1:$port1/" -e "s/navd2:8080/127.0.0.1:$port2/" -e "s/navd3:8080/127.0.0.1:$port3/" \
    -e "s/listen 8080;/listen 127.0.0.1:$nginx_port;/" \
    -e "s|^http {|http {\n    client_body_temp_path $work/nginx/body;\n    proxy_temp_path $work/nginx/proxy;\n    fastcgi_temp_path $work/nginx/fastcgi;\n    uwsgi_temp_path $work/nginx/uwsgi;\n    scgi_temp_path $work/nginx/scgi;|" \
    deploy/nginx.conf >"$work/nginx.conf"
grep -q "127.0.0.1:$port3" "$work/nginx.conf" || { echo "cluster-test: deploy/nginx.conf no longer names navd3:8080" >&2; exit 1; }
nginx -p "$work/nginx" -c "$work/nginx.conf" -g "pid $work/nginx.pid; error_log $work/nginx/error.log warn;" -t -q
nginx -p "$work/nginx" -c "$work/nginx.conf" -g "pid $work/nginx.pid; error_log $work/nginx/error.log warn;"

status=0
timeout -k 10 120 python3 scripts/cluster_test.py --binary "$navd" --work "$work" \
  --database-url "postgresql://navd@127.0.0.1:$pg_port/navd" --nginx-port "$nginx_port" \
  --node-ports "$port1,$port2,$port3" || status=$?
if [[ $status -ne 0 ]]; then
  echo "cluster-test: failed ($status); the nodes' last log lines:" >&2
  tail -n 5 "$work"/navd*.log >&2 || true
  tail -n 10 "$work/nginx/error.log" >&2 || true
fi
exit $status
