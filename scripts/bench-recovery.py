#!/usr/bin/env python3
"""Recovery benchmark: N counter sessions on the SQLite store, then a restart.

Usage: scripts/bench-recovery.py NAVD_BINARY [N=100000] [ACTIONS=0]

Starts navd on a fresh data directory, creates N counter sessions (64 keep-alive connections,
so creations share commits), sends each ACTIONS increments (journal rows and kept events that
the restart must read back), records navd's RSS, stops it with SIGTERM, starts it again on
the same directory and measures the time from exec to the first 200 from /readyz, the RSS
once recovered, and the store's bytes per session. Prints one RESULT line. Stdlib only;
everything on loopback.
"""
import http.client
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def start(binary, data_dir):
    started = time.monotonic()
    process = subprocess.Popen([binary, "--port", "0", "--log-requests", "off", "--data-dir", data_dir,
                                "--fact-base-url", "http://127.0.0.1:9"], stdout=subprocess.PIPE)
    for raw in process.stdout:
        line = json.loads(raw)
        if line.get("event") == "listening":
            port = line["port"]
            break
    else:
        raise SystemExit("navd exited before listening")
    while True:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        connection.request("GET", "/readyz")
        if connection.getresponse().status == 200:
            return process, port, time.monotonic() - started
        time.sleep(0.01)


def create(port, count, actions, sessions, errors):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for _ in range(count):
        connection.request("POST", "/sessions", body=b'{"feature":"counter"}', headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        body = response.read()
        if response.status != 201:
            errors.append(response.status)
            continue
        created = json.loads(body)
        sessions.append((created["id"], created["token"]))
        for _ in range(actions):
            connection.request("POST", f"/sessions/{created['id']}/actions",
                               body=b'{"target":"root","action":"incrementButtonTapped","args":{}}',
                               headers={"Content-Type": "application/json", "Authorization": f"Bearer {created['token']}"})
            response = connection.getresponse()
            response.read()
            if response.status != 200:
                errors.append(response.status)


def main():
    binary = sys.argv[1]
    total = int(sys.argv[2]) if len(sys.argv) > 2 else 100_000
    actions = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    data_dir = tempfile.mkdtemp(prefix="navd-recovery-")
    try:
        process, port, _ = start(binary, data_dir)
        sessions, errors, workers = [], [], 64
        began = time.monotonic()
        threads = [threading.Thread(target=create, args=(port, total // workers + (1 if i < total % workers else 0), actions, sessions, errors))
                   for i in range(workers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        create_seconds = time.monotonic() - began
        if errors:
            raise SystemExit(f"{len(errors)} creations failed: {errors[:5]}")
        time.sleep(2)  # let the allocator return what the creations used
        rss_before = rss_kib(process.pid)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        store_bytes = sum(os.path.getsize(os.path.join(data_dir, name)) for name in os.listdir(data_dir))

        process, port, recovery_seconds = start(binary, data_dir)
        time.sleep(2)
        rss_after = rss_kib(process.pid)
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
        session_id, token = sessions[len(sessions) // 2]
        connection.request("GET", f"/sessions/{session_id}", headers={"Authorization": f"Bearer {token}"})
        response = connection.getresponse()
        if response.status != 200 or json.loads(response.read())["state"]["count"] != actions:
            raise SystemExit("a session was not recovered as it was")
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
        print(f"RESULT sessions={total} actions_each={actions} create_per_s={total / create_seconds:.0f} recovery_s={recovery_seconds:.2f} "
              f"rss_before_kib={rss_before} rss_after_kib={rss_after} store_bytes_per_session={store_bytes / total:.0f}")
    finally:
        if os.environ.get("KEEP_DATA"): print("data in", data_dir)
        else: shutil.rmtree(data_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
