#!/usr/bin/env bash
# Checks a live navd's /metrics with `promtool check metrics` (Debian's `prometheus` package;
# scripts/system-packages.sh --test installs it): the exposition parses, and promtool's lint finds
# nothing (HELP and TYPE, counters ending in _total, units in names). Before the scrape it sends
# traffic of every kind (sessions, actions with and without ?wait=true, errors, an event stream)
# so that every family has samples, and it checks that the families the README lists are there.
#
#   scripts/check-metrics.sh [NAVD_BINARY]     (default .build/debug/navd)
#
# navd runs on a free loopback port, with a durable store in a temporary directory and a fact
# service URL nothing listens on: no request leaves the machine. Takes a few seconds.
set -Eeuo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/navd-lib.sh"

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
navd=${1:-.build/debug/navd}
[[ $navd == /* ]] || navd=$PWD/$navd
[[ -x $navd ]] || { echo "FAIL: no navd binary at $navd (swift build --product navd)" >&2; exit 1; }
command -v promtool >/dev/null || { echo "FAIL: promtool missing (scripts/system-packages.sh --test installs it)" >&2; exit 1; }
cd "$repo_root"

work=$(mktemp -d "${TMPDIR:-/tmp}/navd-metrics.XXXXXX")
navd_pid=
cleanup() {
    local status=$?
    stop_navd "$status" "$work/navd.log"
    rm -rf "$work"
    exit "$status"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

start_navd "$navd" "$work/navd.log" --data-dir "$work/data"

echo "== promtool check metrics on navd's /metrics (127.0.0.1:$port)"
python3 - "$port" "$work/metrics.txt" <<'PY'
import http.client, json, sys

port, out = int(sys.argv[1]), sys.argv[2]

def call(method, path, body=None, headers=None):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    h = dict(headers or {})
    if body is not None:
        h["Content-Type"] = "application/json"
    connection.request(method, path, body=None if body is None else json.dumps(body).encode(), headers=h)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data

status, data = call("POST", "/sessions", {"feature": "counter"})
assert status == 201, (status, data)
session = json.loads(data)
auth = {"Authorization": f"Bearer {session['token']}"}
base = f"/sessions/{session['id']}"
call("POST", f"{base}/actions", {"action": "incrementButtonTapped"}, auth)
call("POST", f"{base}/actions?wait=true&timeout=5", {"action": "factButtonTapped"}, auth)
call("POST", f"{base}/actions", {"action": "nope"}, auth)
call("GET", "/nope")
call("BREW", "/healthz")
call("HEAD", "/features")
stream = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
stream.request("GET", f"{base}/events", headers=auth)
response = stream.getresponse()
assert response.status == 200, response.status
response.fp.readline()
status, data = call("GET", "/metrics")
assert status == 200, status
stream.close()
open(out, "wb").write(data)
PY

lint=$(promtool check metrics <"$work/metrics.txt" 2>&1) || { echo "$lint" >&2; echo "FAIL: promtool check metrics" >&2; exit 1; }
[[ -z $lint ]] || { echo "$lint" >&2; echo "FAIL: promtool's lint found problems" >&2; exit 1; }
missing=()
for family in navd_build_info navd_http_requests_total navd_http_request_duration_seconds \
    navd_http_wait_request_duration_seconds navd_store_commits_total navd_session_memory_bytes navd_session_memory_limit_bytes process_resident_memory_bytes \
    process_open_fds process_cpu_seconds_total process_start_time_seconds; do
    grep -q "^# TYPE $family " "$work/metrics.txt" || missing+=("$family")
done
[[ ${#missing[@]} -eq 0 ]] || { echo "FAIL: /metrics lacks ${missing[*]}" >&2; exit 1; }
grep -q '^navd_http_requests_total{route="actions",method="POST",code="200"} 2$' "$work/metrics.txt" \
    || { echo "FAIL: actions are not counted by route, method and code" >&2; exit 1; }
echo "OK: promtool accepts /metrics ($(grep -vc '^#' "$work/metrics.txt") samples), every family present"
