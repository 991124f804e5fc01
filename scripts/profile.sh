#!/usr/bin/env bash
# Profiles navd under the action benchmark: records it with perf (Debian's linux-perf) while
# ../shared/bench/run-actions.sh drives it, then writes a flame graph (perf's own flamegraph
# report, as JSON for d3-flame-graph) and the top entries: where the CPU goes by thread kind,
# by library, and by function.
#
# Usage: scripts/profile.sh NAVD_BINARY OUT_DIR [STORE=memory] [SECONDS=8]
#   STORE: memory or sqlite (the durable default, in a fresh data directory)
# Writes OUT_DIR/perf.data, OUT_DIR/flamegraph.json and OUT_DIR/top.txt.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
NAVD="$(realpath "${1:?usage: scripts/profile.sh NAVD_BINARY OUT_DIR [STORE] [SECONDS]}")"
OUT="${2:?usage: scripts/profile.sh NAVD_BINARY OUT_DIR [STORE] [SECONDS]}"
STORE="${3:-memory}"
SECONDS_ARG="${4:-8}"
command -v perf >/dev/null || { echo "perf not found (apt-get install -y linux-perf)" >&2; exit 2; }
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
data="$(mktemp -d)"
port=$((9600 + RANDOM % 300))
"$NAVD" --port "$port" --log-requests off --store "$STORE" --data-dir "$data/store" >/dev/null 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$data"' EXIT
for _ in $(seq 50); do curl -sf -o /dev/null "http://127.0.0.1:$port/healthz" && break; sleep 0.1; done

# The load runs two seconds longer than the recording on each side, so only steady state is seen.
../shared/bench/run-actions.sh "http://127.0.0.1:$port" $((SECONDS_ARG + 4)) 32 >"$OUT/load.txt" 2>&1 &
load=$!
sleep 2
perf record -F 999 -g -p "$pid" -o "$OUT/perf.data" -- sleep "$SECONDS_ARG" >/dev/null 2>&1
wait $load
tail -1 "$OUT/load.txt"

(cd "$OUT" && perf script report flamegraph --format json -o flamegraph.json >/dev/null 2>&1) || echo "no flame graph (perf's flamegraph report needs python3)" >&2
{
  echo "# $(tail -1 "$OUT/load.txt")"
  echo "## by kind of thread"
  # A sample belongs to an event loop when EventLoop.run is on its stack, to the cooperative pool
  # when a Swift job runs on a dispatch worker, to the store's writer when GroupCommit drains.
  perf script -i "$OUT/perf.data" -F ip,sym 2>/dev/null | python3 -c '
import sys
counts, stack = {}, []
def close():
    if not stack: return
    text = " ".join(stack)
    kind = ("event loop" if "EventLoopC3run" in text else
            "store writer" if "GroupCommit" in text else
            "cooperative pool" if "swift_job_run" in text or "swift::runJobInEstablishedExecutorContext" in text else
            "unattributed (libc frames without a frame pointer: malloc, free, send)")
    counts[kind] = counts.get(kind, 0) + 1
for line in sys.stdin:
    if line.strip(): stack.append(line.strip())
    else: close(); stack = []
close()
total = sum(counts.values()) or 1
for kind, n in sorted(counts.items(), key=lambda kv: -kv[1]): print(f"{100 * n / total:6.1f}%  {kind}")'
  echo "## by library"
  perf report -i "$OUT/perf.data" --no-children --sort dso --stdio -g none 2>/dev/null | grep '%' | head -8
  echo "## by function (self)"
  perf report -i "$OUT/perf.data" --no-children --sort dso,symbol --stdio -g none 2>/dev/null | grep '%' | head -30 | cut -c1-160
} >"$OUT/top.txt"
cat "$OUT/top.txt"
