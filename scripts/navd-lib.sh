# Sourced by the scripts that check a live navd (schemathesis.sh, python-client-test.sh,
# check-metrics.sh): starts it on a free loopback port and waits for its "listening" line,
# and stops it again.

# start_navd NAVD LOG [ARG ...]: runs NAVD on 127.0.0.1 with port 0 and a fact service that is
# down (a port nothing listens on, 200 ms timeout), plus the given arguments, writing its log to
# LOG. Sets navd_pid and port; exits the script if navd stops or reports no port within 10 s.
start_navd() {
    local navd=$1 log=$2
    shift 2
    local closed_port
    closed_port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$navd" --host 127.0.0.1 --port 0 \
        --fact-base-url "http://127.0.0.1:$closed_port" --fact-timeout-ms 200 "$@" >"$log" 2>&1 &
    navd_pid=$!
    port=
    for _ in $(seq 100); do
        port=$(sed -n 's/^{.*"event":"listening".*"port":\([0-9]*\).*}$/\1/p' "$log" | head -n 1)
        [[ -n $port ]] && return 0
        kill -0 "$navd_pid" 2>/dev/null || { echo "FAIL: navd exited" >&2; exit 1; }
        sleep 0.1
    done
    echo "FAIL: navd did not report its port within 10 s" >&2
    exit 1
}

# stop_navd STATUS LOG: stops the navd start_navd started (SIGTERM, then SIGKILL if it is still there
# after 5 s) and, when the script is failing (status in $1), shows the last lines of its log.
stop_navd() {
    local status=$1 log=$2
    if [[ -n ${navd_pid:-} ]] && kill -0 "$navd_pid" 2>/dev/null; then
        kill -TERM "$navd_pid" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$navd_pid" 2>/dev/null || break; sleep 0.1; done
        kill -KILL "$navd_pid" 2>/dev/null || true
        wait "$navd_pid" 2>/dev/null || true
    fi
    if [[ $status -ne 0 && -s $log ]]; then
        echo "--- last lines of navd's log ---" >&2
        tail -n 20 "$log" >&2
    fi
}
