#!/usr/bin/env bash
# Measures navd against the Hummingbird peer in one run, alternating them, with the scripts in
# ../shared/bench, and prints each figure with its ratio to the peer's. navd runs with its
# durable default (SQLite, a fresh data directory each time) on each I/O backend (`--io epoll`,
# `--io dispatch`); actions are also measured with `--store memory`, and the store's commit latency and batch sizes are read from /metrics. The
# limit of the action benchmark's HTTP shape on this machine is measured in the same run: nginx
# answering every request with a fixed body (../shared/bench/limit-nginx.sh).
#
# Usage: scripts/bench-vs-peer.sh PEER_BINARY [ROUNDS=2]
#   PEER_BINARY: the peer built with `swift build -c release` in ../shared/peers/hummingbird/peer
#   (or a copy of that directory). navd is built here in release first.
# Needs wrk and nginx (apt-get install -y wrk nginx) and python3. Everything runs on loopback.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PEER="${1:?usage: scripts/bench-vs-peer.sh PEER_BINARY [ROUNDS]}"
ROUNDS="${2:-2}"
BENCH="$(cd ../shared/bench && pwd)"
swift build -c release --product navd >/dev/null
NAVD="$(swift build -c release --show-bin-path)/navd"
ulimit -n "$(ulimit -Hn)"

pid=""
data="$(mktemp -d)"
io() { [[ "$1" == *dispatch* ]] && echo dispatch || echo epoll; }  # io NAME: navd's --io
start() {  # start NAME PORT
  if [[ "$1" == navd || "$1" == navd-dispatch ]]; then
    rm -rf "$data/store"
    "$NAVD" --port "$2" --log-requests off --data-dir "$data/store" --io "$(io "$1")" >/dev/null 2>&1 &
  elif [[ "$1" == navd-memory || "$1" == navd-dispatch-memory ]]; then
    "$NAVD" --port "$2" --log-requests off --store memory --io "$(io "$1")" >/dev/null 2>&1 &
  elif [[ "$1" == limit ]]; then
    "$BENCH/limit-nginx.sh" "$2" >/dev/null 2>&1 &
  else
    PORT="$2" "$PEER" >/dev/null 2>&1 &
  fi
  pid=$!
  for _ in $(seq 50); do curl -s -o /dev/null "http://127.0.0.1:$2/sessions" -X POST -H 'Content-Type: application/json' -d '{"feature":"counter"}' && return; sleep 0.1; done
  echo "$1 did not start" >&2; exit 1
}
stop() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
trap 'stop; rm -rf "$data"' EXIT
# The store's figures from /metrics: commit latency p50/p99 (bucket upper bounds) and mean batch.
store_figures() {  # store_figures PORT
  curl -s "http://127.0.0.1:$1/metrics" | python3 -c '
import re, sys
text = sys.stdin.read()
def value(name):
    found = re.search("^" + re.escape(name) + " (\\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0
buckets = [(float(b), float(c)) for b, c in re.findall(r"^navd_store_commit_seconds_bucket\{le=\"([0-9.e-]+)\"\} (\S+)$", text, re.M)]
commits, writes = value("navd_store_commits_total"), value("navd_store_writes_total")
def quantile(q):
    return next((b for b, c in buckets if c >= q * commits), float("inf")) * 1000
print(f"commit_p50_ms<={quantile(0.5):g} commit_p99_ms<={quantile(0.99):g} mean_batch={writes / max(commits, 1):.1f} commits={commits:.0f}")'
}
field() { tr ' ' '\n' | sed -n "s/^$1=//p"; }

declare -A sum
run() {  # run NAME MEASURE
  local name=$1 measure=$2 port=$((9100 + RANDOM % 500)) line
  start "$name" "$port"
  "$BENCH/wait-idle.sh" 85 120 >/dev/null || true
  case $measure in
    actions) line=$(CHECK=$([[ $name == limit ]] && echo 0 || echo 1) "$BENCH/run-actions.sh" "http://127.0.0.1:$port" 10 32 | tail -1)
             [[ $name == navd || $name == navd-dispatch ]] && line="$line $(store_figures "$port")" ;;
    sse) line=$(python3 "$BENCH/sse_latency.py" "http://127.0.0.1:$port" 1000 200 | tail -1) ;;
    hold) line=$(python3 "$BENCH/sse_hold.py" "http://127.0.0.1:$port" 10000 "$pid" | tail -1) ;;
  esac
  stop
  echo "$name $measure: $line"
  case $measure in
    actions) sum[$name.rps]=$(echo "${sum[$name.rps]:-0} + $(echo "$line" | field actions_rps)" | bc -l)
             sum[$name.ap99]=$(echo "${sum[$name.ap99]:-0} + $(echo "$line" | field p99_ms)" | bc -l) ;;
    sse) sum[$name.p99]=$(echo "${sum[$name.p99]:-0} + $(echo "$line" | field p99_ms)" | bc -l)
         sum[$name.p50]=$(echo "${sum[$name.p50]:-0} + $(echo "$line" | field p50_ms)" | bc -l) ;;
    hold) sum[$name.kib]=$(echo "${sum[$name.kib]:-0} + $(echo "$line" | field kib_per_conn)" | bc -l) ;;
  esac
}

for _ in $(seq "$ROUNDS"); do
  for measure in actions sse hold; do
    run peer "$measure"
    run navd "$measure"
    run navd-dispatch "$measure"
    if [[ $measure == actions ]]; then run navd-memory actions; run navd-dispatch-memory actions; run limit actions; fi
  done
done

ratio() { echo "scale=2; $1 / $2" | bc -l; }
avg() { echo "scale=2; $1 / $ROUNDS" | bc -l; }
echo
echo "means of $ROUNDS rounds (navd / peer):"
echo "actions_rps          navd $(avg "${sum[navd.rps]}")  peer $(avg "${sum[peer.rps]}")  ratio $(ratio "${sum[navd.rps]}" "${sum[peer.rps]}")"
echo "actions_rps, memory  navd $(avg "${sum[navd-memory.rps]}")  ratio $(ratio "${sum[navd-memory.rps]}" "${sum[peer.rps]}")  durable / memory $(ratio "${sum[navd.rps]}" "${sum[navd-memory.rps]}")"
echo "actions_rps, limit   nginx $(avg "${sum[limit.rps]}")  memory / limit $(ratio "${sum[navd-memory.rps]}" "${sum[limit.rps]}")"
echo "actions p99 ms (32)  navd $(avg "${sum[navd.ap99]}")  memory $(avg "${sum[navd-memory.ap99]}")  peer $(avg "${sum[peer.ap99]}")"
echo "sse p50 ms (1000)    navd $(avg "${sum[navd.p50]}")  peer $(avg "${sum[peer.p50]}")  ratio $(ratio "${sum[navd.p50]}" "${sum[peer.p50]}")"
echo "sse p99 ms (1000)    navd $(avg "${sum[navd.p99]}")  peer $(avg "${sum[peer.p99]}")  ratio $(ratio "${sum[navd.p99]}" "${sum[peer.p99]}")"
echo "KiB per idle stream  navd $(avg "${sum[navd.kib]}")  peer $(avg "${sum[peer.kib]}")  ratio $(ratio "${sum[navd.kib]}" "${sum[peer.kib]}")"
echo "dispatch backend (--io dispatch) / peer:"
echo "  actions_rps        navd $(avg "${sum[navd-dispatch.rps]}")  ratio $(ratio "${sum[navd-dispatch.rps]}" "${sum[peer.rps]}")  memory $(avg "${sum[navd-dispatch-memory.rps]}")  ratio $(ratio "${sum[navd-dispatch-memory.rps]}" "${sum[peer.rps]}")"
echo "  actions p99 ms     navd $(avg "${sum[navd-dispatch.ap99]}")  memory $(avg "${sum[navd-dispatch-memory.ap99]}")"
echo "  sse p99 ms (1000)  navd $(avg "${sum[navd-dispatch.p99]}")  ratio $(ratio "${sum[navd-dispatch.p99]}" "${sum[peer.p99]}")"
echo "  KiB per idle stream navd $(avg "${sum[navd-dispatch.kib]}")  ratio $(ratio "${sum[navd-dispatch.kib]}" "${sum[peer.kib]}")"
