#!/usr/bin/env bash
# Actions per second through nginx with 1, 2 and 3 navd on one PostgreSQL, against one navd on
# SQLite and in memory (direct) and the Hummingbird peer, with ../shared/bench's run-actions.sh
# (wrk, 32 connections, 10 s); then one connection at a time, to see the latency nginx and
# PostgreSQL add to one action, and the CPU each process spends per action. Loopback only.
#
#   scripts/bench-cluster.sh [PEER_BINARY]      (default /tmp/peer/.build/release/peer)
#
# Two cores run everything here (wrk, nginx, PostgreSQL, the nodes): more nodes add no cores,
# so this measures what each piece costs, not how the cluster scales.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source scripts/cluster-lib.sh
PEER=${1:-/tmp/peer/.build/release/peer}
BENCH="$(cd ../shared/bench 2>/dev/null && pwd || echo /work/shared/bench)"
swift build -c release --product navd >/dev/null
NAVD="$(swift build -c release --show-bin-path)/navd"
ulimit -n "$(ulimit -Hn)"

work=$(mktemp -d "${TMPDIR:-/tmp}/navd-bench-cluster.XXXXXX")
pids=()
stop_all() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; done
  pids=()
  rm -f "$work"/navd*.pid
  cluster_stop_nginx
}
trap 'stop_all; cluster_cleanup; rm -rf "$work"' EXIT
cluster_prepare
read -r pg_port nginx_port p1 p2 p3 p4 < <(cluster_ports 6)
cluster_start_postgres "$pg_port"
url="postgresql://navd@127.0.0.1:$pg_port/navd"
psql_value() { "${as_postgres[@]}" "$pg_bin/psql" -h 127.0.0.1 -p "$pg_port" -U navd -d navd -X -q -t -A -c "$1"; }

start_navd() {  # start_navd PORT FLAGS...
  local port=$1
  shift
  "$NAVD" --host 127.0.0.1 --port "$port" --log-requests off --fact-base-url http://127.0.0.1:9 "$@" >/dev/null 2>&1 &
  pids+=($!)
  echo $! >"$work/navd$port.pid"
  for _ in $(seq 100); do curl -sf -o /dev/null "http://127.0.0.1:$port/readyz" && return; sleep 0.1; done
  echo "navd on $port did not start" >&2; exit 1
}
start_peer() {
  PORT=$1 "$PEER" >/dev/null 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do curl -s -o /dev/null "http://127.0.0.1:$1/sessions" -X POST -H 'Content-Type: application/json' -d '{"feature":"counter"}' && return; sleep 0.1; done
  echo "peer did not start" >&2; exit 1
}

# CPU seconds (user + system) of processes: the navd nodes, nginx (master and workers),
# PostgreSQL (the postmaster and every backend).
cpu_of() { local total=0 pid; for pid in "$@"; do [[ -r /proc/$pid/stat ]] && total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat"))); done; echo "$total"; }
nginx_pids() { [[ -f $work/nginx.pid ]] && { cat "$work/nginx.pid"; pgrep -P "$(cat "$work/nginx.pid")"; } || true; }
pg_pids() { local master; master=$(head -1 "$work/pg/data/postmaster.pid"); echo "$master"; pgrep -P "$master"; }
metric_sum() {  # metric_sum NAME PORT...
  local name=$1 total=0 value port
  shift
  for port in "$@"; do
    value=$(curl -s "http://127.0.0.1:$port/metrics" | awk -v n="$name" '$1 == n { print $2 }')
    total=$(echo "$total + ${value:-0}" | bc -l)
  done
  echo "$total"
}
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }

# measure NAME URL CONNECTIONS SECONDS NAVD_PORTS...: one run-actions.sh, with CPU per action.
measure() {
  local name=$1 target=$2 connections=$3 seconds=$4
  shift 4
  local navd_pids=() port
  for port in "$@"; do navd_pids+=("$(cat "$work/navd$port.pid")"); done
  local hz; hz=$(getconf CLK_TCK)
  local n0 x0 g0 w0 c0 line
  n0=$(cpu_of "${navd_pids[@]}"); x0=$(cpu_of $(nginx_pids)); g0=$(cpu_of $(pg_pids))
  w0=$(psql_value "SELECT pg_current_wal_lsn() - '0/0'")
  c0=$(metric_sum navd_store_commits_total "$@")
  line=$(THREADS=$(( connections < 2 ? 1 : 2 )) "$BENCH/run-actions.sh" "$target" "$seconds" "$connections" 2>/dev/null | tail -1)
  local rps actions navd_cpu nginx_cpu pg_cpu wal commits
  rps=$(echo "$line" | field actions_rps)
  actions=$(echo "$rps * $seconds" | bc -l)
  navd_cpu=$(( $(cpu_of "${navd_pids[@]}") - n0 )); nginx_cpu=$(( $(cpu_of $(nginx_pids)) - x0 )); pg_cpu=$(( $(cpu_of $(pg_pids)) - g0 ))
  wal=$(( $(psql_value "SELECT pg_current_wal_lsn() - '0/0'" | cut -d. -f1) - ${w0%.*} ))
  commits=$(echo "$(metric_sum navd_store_commits_total "$@") - $c0" | bc -l)
  printf '%s: %s; CPU µs per action: navd %.0f, nginx %.0f, postgres %.0f; commits/s %.0f; WAL bytes per action %.0f\n' \
    "$name" "$line" "$(echo "$navd_cpu * 1000000 / $hz / $actions" | bc -l)" "$(echo "$nginx_cpu * 1000000 / $hz / $actions" | bc -l)" \
    "$(echo "$pg_cpu * 1000000 / $hz / $actions" | bc -l)" "$(echo "$commits / $seconds" | bc -l)" "$(echo "$wal / $actions" | bc -l)"
}

ports=("$p1" "$p2" "$p3")
echo "== throughput: 32 connections, 10 s"
for count in 1 2 3; do
  for index in $(seq 0 $((count - 1))); do start_navd "${ports[$index]}" --store postgres --database-url "$url"; done
  cluster_start_nginx "$nginx_port" "${ports[@]:0:$count}"
  "$BENCH/wait-idle.sh" 80 60 >/dev/null || true
  measure "postgres, $count node(s) through nginx" "http://127.0.0.1:$nginx_port" 32 10 "${ports[@]:0:$count}"
  stop_all
done
start_navd "$p4" --store sqlite --data-dir "$work/sqlite"
"$BENCH/wait-idle.sh" 80 60 >/dev/null || true
measure "sqlite, 1 node direct" "http://127.0.0.1:$p4" 32 10 "$p4"
stop_all
start_navd "$p4" --store memory
measure "memory, 1 node direct" "http://127.0.0.1:$p4" 32 10 "$p4"
stop_all
if [[ -x $PEER ]]; then
  start_peer "$p4"
  echo "peer, direct: $("$BENCH/run-actions.sh" "http://127.0.0.1:$p4" 10 32 2>/dev/null | tail -1)"
  stop_all
fi

echo "== one action at a time: 1 connection, 5 s"
start_navd "$p1" --store postgres --database-url "$url"
cluster_start_nginx "$nginx_port" "$p1"
measure "postgres, through nginx" "http://127.0.0.1:$nginx_port" 1 5 "$p1"
measure "postgres, direct" "http://127.0.0.1:$p1" 1 5 "$p1"
stop_all
start_navd "$p4" --store sqlite --data-dir "$work/sqlite2"
measure "sqlite, direct" "http://127.0.0.1:$p4" 1 5 "$p4"
stop_all
start_navd "$p4" --store memory
measure "memory, direct" "http://127.0.0.1:$p4" 1 5 "$p4"
stop_all

echo "== the store"
sessions=$(psql_value "SELECT count(*) FROM navd_sessions")
echo "sessions: $sessions; bytes: sessions $(psql_value "SELECT pg_total_relation_size('navd_sessions')"), transactions $(psql_value "SELECT pg_total_relation_size('navd_transactions')"), events $(psql_value "SELECT pg_total_relation_size('navd_events')")"
echo "rows: transactions $(psql_value "SELECT count(*) FROM navd_transactions"), events $(psql_value "SELECT count(*) FROM navd_events")"
