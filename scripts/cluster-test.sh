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

source scripts/cluster-lib.sh
if [[ -n ${NAVD_BINARY:-} ]]; then
  navd=$NAVD_BINARY
else
  swift build --product navd
  navd="$(swift build --show-bin-path)/navd"
fi
[[ -x $navd ]] || { echo "cluster-test: no navd binary at $navd" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/navd-cluster.XXXXXX")
cleanup() {
  cluster_cleanup
  if [[ ${NAVD_CLUSTER_KEEP:-0} == 1 ]]; then echo "cluster-test: kept $work" >&2; else rm -rf "$work"; fi
}
trap cleanup EXIT
cluster_prepare
read -r pg_port port1 port2 port3 nginx_port < <(cluster_ports 5)
cluster_start_postgres "$pg_port"
cluster_start_nginx "$nginx_port" "$port1" "$port2" "$port3"

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
