#!/usr/bin/env bash
# kill -9 crash test of navd's durable SQLite store (scripts/crash_test.py does the work).
#
#   scripts/crash-test.sh [rounds]          (default 10: about a minute on 2 cores)
#   scripts/crash-test.sh 200               (a long run, for benchmarks and soak)
#
# Client threads send actions, bindings, pushes, pops, dismissals and deep links while stream
# subscribers follow every session; navd gets SIGKILL after a random 0.2-1.5 s of traffic and is
# started again on the same data directory. After every restart: no acknowledged change or
# session lost, no event id reused or skipped, every subscriber's tree equals the server's.
# Ends with one line: "crash-test: N rounds, N acknowledged changes, N events checked, N failures".
#
# Environment: NAVD_BINARY (default: a debug build of navd), NAVD_CRASH_SEED (repeat a run's
# random choices), NAVD_CRASH_KEEP=1 (keep the work directory: data, navd's stdout and stderr).
# Everything stays on 127.0.0.1; the fact service URL points at a closed loopback port.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

rounds=${1:-10}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "usage: $0 [rounds]" >&2; exit 2; }

if [[ -n ${NAVD_BINARY:-} ]]; then
  navd=$NAVD_BINARY
else
  swift build --product navd
  navd="$(swift build --show-bin-path)/navd"
fi
[[ -x $navd ]] || { echo "crash-test: no navd binary at $navd" >&2; exit 1; }

work=$(mktemp -d "${TMPDIR:-/tmp}/navd-crash.XXXXXX")
cleanup() {
  # The driver kills its navd itself; this covers the driver being killed first.
  if [[ -f $work/navd.pid ]]; then
    pid=$(cat "$work/navd.pid")
    if kill -0 "$pid" 2>/dev/null; then kill -9 "$pid" 2>/dev/null || true; fi
  fi
  if [[ ${NAVD_CRASH_KEEP:-0} == 1 ]]; then
    echo "crash-test: kept $work" >&2
  else
    rm -rf "$work"
  fi
}
trap cleanup EXIT

python3 scripts/crash_test.py --binary "$navd" --work "$work" --rounds "$rounds" \
  ${NAVD_CRASH_SEED:+--seed "$NAVD_CRASH_SEED"}
