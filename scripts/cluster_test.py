#!/usr/bin/env python3
"""Cluster test: three navd on one PostgreSQL behind nginx; scripts/cluster-test.sh starts the
database and nginx (with deploy/nginx.conf) and runs this.

Counter sessions are created through nginx; client threads increment them through nginx while
one subscriber per session follows its event stream through nginx. Then one node gets SIGKILL.
It checks what the several-nodes section of the README promises:

- every session answers 200 through nginx again within a few seconds of the kill (its next
  request loads it on another node);
- nothing acknowledged is lost: each counter is at least what was acknowledged and at most that
  plus the requests whose answer was lost with the node (502); versions never go back;
- every stream resumes through nginx with Last-Event-ID: each reconnection gets exactly the next
  id, never a gap, a duplicate or a snapshot, and ends up with every acknowledged event;
- after the node is started again, exactly the sessions it held before come back to it (the
  consistent hash moves only its share, about a third but varying by run), and nobody else's.

Python 3 standard library only; everything on 127.0.0.1. Exit code 0 when nothing failed.
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request

from crash_test import CONNECTION_ERRORS, Client, EventStream, Inconsistency

INCREMENT = {"target": "root", "action": "incrementButtonTapped"}
# How soon after the kill every session must answer again, and every stream resume.
RECOVERY_SECONDS = 5.0


class World:
    def __init__(self):
        self.lock = threading.Lock()
        self.failures = []
        self.notes = {}
        # Clients stop first; subscribers once they have caught up.
        self.stopping = threading.Event()
        self.unsubscribing = threading.Event()

    def fail(self, message):
        with self.lock:
            self.failures.append(message)
        print(f"cluster-test: FAIL {message}", file=sys.stderr, flush=True)

    def note(self, what, count=1):
        with self.lock:
            self.notes[what] = self.notes.get(what, 0) + count


class Session:
    def __init__(self, sid, token):
        self.id, self.token = sid, token
        self.lock = threading.Lock()
        self.acknowledged = 0
        self.uncertain = 0
        self.version = 0
        self.last_acknowledged_event = 0
        # Answer times of its 200s, to measure how long it was unanswered around the kill.
        self.answered = []
        # The subscriber's last event id, and when its stream last came back.
        self.seen = None
        self.resumed = []
        self.dropped = []


class Node:
    def __init__(self, name, binary, port, database_url, work):
        self.name, self.binary, self.port, self.database_url, self.work = name, binary, port, database_url, work
        self.log = open(os.path.join(work, f"{name}.log"), "ab")
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen(
            [self.binary, "--host", "127.0.0.1", "--port", str(self.port), "--store", "postgres",
             "--database-url", self.database_url, "--log-requests", "off", "--fact-base-url", "http://127.0.0.1:9"],
            stdin=subprocess.DEVNULL, stdout=self.log, stderr=self.log)
        with open(os.path.join(self.work, f"{self.name}.pid"), "w") as pid_file:
            pid_file.write(f"{self.proc.pid}\n")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/readyz", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not become ready")

    def kill9(self):
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=8)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def metric(self, name):
        """A sample without labels from the node's own /metrics (not through nginx)."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=5) as response:
            for line in response.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        return None


def drive(world, port, sessions, pause):
    """Increments its sessions in turn through nginx until told to stop."""
    client = Client(port)
    while not world.stopping.is_set():
        for session in sessions:
            if world.stopping.is_set():
                break
            try:
                status, body = client.json("POST", f"/sessions/{session.id}/actions", session.token, INCREMENT)
            except CONNECTION_ERRORS:
                # nginx itself never goes: a broken connection to it lost the answer, maybe not the change.
                client.close()
                client = Client(port)
                with session.lock:
                    session.uncertain += 1
                world.note("requests whose connection broke")
                continue
            now = time.monotonic()
            if status == 200:
                with session.lock:
                    session.acknowledged += 1
                    if body["version"] <= session.version:
                        world.fail(f"{session.id}: version {body['version']} acknowledged after {session.version}")
                    session.version = body["version"]
                    ids = [event["id"] for event in body["events"]]
                    if ids:
                        session.last_acknowledged_event = max(session.last_acknowledged_event, max(ids))
                    session.answered.append(now)
            elif status in (502, 504):
                # The node died with the request: it may or may not have been committed.
                with session.lock:
                    session.uncertain += 1
                world.note(f"answers {status} (node gone mid-request)")
            elif status in (404, 503):
                # 404: the node it reached had just been taken over (nothing changed); 503: a node
                # shutting down or a store hiccup (nothing changed). Both are sent again.
                world.note(f"answers {status} (nothing changed; sent again)")
            else:
                world.fail(f"{session.id}: POST actions answered {status} {body}")
            time.sleep(pause)
    client.close()


def subscribe(world, port, session):
    """Follows the session's stream through nginx, reconnecting with Last-Event-ID."""
    while not world.unsubscribing.is_set():
        try:
            stream = EventStream(port, session, last_event_id=session.seen, timeout=5)
        except Inconsistency as refusal:
            world.note("stream requests refused while the session moved")
            if "404" not in str(refusal) and "502" not in str(refusal) and "503" not in str(refusal):
                world.fail(f"{session.id}: {refusal}")
            time.sleep(0.1)
            continue
        except CONNECTION_ERRORS:
            time.sleep(0.1)
            continue
        first = True
        try:
            while not world.unsubscribing.is_set():
                event = stream.next_event(0.5)
                if event is None:
                    continue
                eid, kind, _ = event
                with session.lock:
                    if session.seen is None:
                        if kind != "snapshot":
                            world.fail(f"{session.id}: a new stream began with {kind} {eid}, not a snapshot")
                    elif kind == "snapshot":
                        world.fail(f"{session.id}: a resume after {session.seen} got a snapshot ({eid}): the events were not kept")
                    elif eid != session.seen + 1:
                        world.fail(f"{session.id}: after event {session.seen} came {eid}: "
                                   + ("a gap" if eid > session.seen + 1 else "a duplicate"))
                    if first and session.seen is not None:
                        session.resumed.append(time.monotonic())
                        world.note("streams resumed with Last-Event-ID")
                    session.seen = eid
                first = False
        except CONNECTION_ERRORS:
            world.note("streams closed under their subscriber")
            with session.lock:
                session.dropped.append(time.monotonic())
        finally:
            stream.close()


def main():
    # `timeout` sends SIGTERM: stop the nodes on the way out, as on any failure.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(124))
    parser = argparse.ArgumentParser()
    parser.add_argument("--binary", required=True)
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--nginx-port", type=int, required=True)
    parser.add_argument("--node-ports", required=True, help="three comma-separated ports, as nginx.conf names them")
    parser.add_argument("--work", required=True)
    parser.add_argument("--sessions", type=int, default=45)
    arguments = parser.parse_args()
    world = World()
    started = time.monotonic()
    ports = [int(port) for port in arguments.node_ports.split(",")]
    nodes = [Node(f"navd{index + 1}", arguments.binary, port, arguments.database_url, arguments.work) for index, port in enumerate(ports)]
    threads = []
    try:
        for node in nodes:
            node.start()
        client = Client(arguments.nginx_port)
        sessions = []
        for _ in range(arguments.sessions):
            status, body = client.json("POST", "/sessions", body={"feature": "counter"})
            if status != 201:
                raise RuntimeError(f"POST /sessions through nginx answered {status} {body}")
            sessions.append(Session(body["id"], body["token"]))
        client.close()
        for session in sessions:
            threads.append(threading.Thread(target=subscribe, args=(world, arguments.nginx_port, session), daemon=True))
        for index in range(3):
            share = sessions[index::3]
            threads.append(threading.Thread(target=drive, args=(world, arguments.nginx_port, share, 0.01), daemon=True))
        for thread in threads:
            thread.start()

        time.sleep(3)
        victim = nodes[0]
        held = [node.metric("navd_sessions_open") for node in nodes]
        print(f"cluster-test: sessions per node before the kill: {held}", flush=True)
        if sum(held) != len(sessions):
            world.fail(f"the nodes hold {sum(held)} sessions between them, not {len(sessions)}: a session is held twice or not at all")
        killed_at = time.monotonic()
        victim.kill9()
        print(f"cluster-test: killed {victim.name} (kill -9)", flush=True)
        time.sleep(RECOVERY_SECONDS + 1)

        slowest = 0.0
        for session in sessions:
            with session.lock:
                after = [at for at in session.answered if at > killed_at]
            if not after:
                world.fail(f"{session.id}: no 200 through nginx since the kill")
                continue
            # The wait of a session that was idle at the kill starts at its first request after it.
            slowest = max(slowest, after[0] - killed_at)
        moved = [session for session in sessions if session.resumed and session.resumed[-1] > killed_at]
        print(f"cluster-test: every session answered again within {slowest:.2f} s of the kill; "
              f"{len(moved)} streams resumed on another node", flush=True)
        if slowest > RECOVERY_SECONDS:
            world.fail(f"a session took {slowest:.2f} s to answer again")
        # Every stream that closed came back, soon.
        longest = 0.0
        for session in sessions:
            with session.lock:
                for dropped in session.dropped:
                    back = [at for at in session.resumed if at >= dropped]
                    if not back:
                        world.fail(f"{session.id}: its stream closed and did not resume")
                    else:
                        longest = max(longest, back[0] - dropped)
        print(f"cluster-test: every closed stream resumed within {longest:.2f} s", flush=True)
        if longest > RECOVERY_SECONDS:
            world.fail(f"a stream took {longest:.2f} s to resume")

        victim.start()
        print(f"cluster-test: restarted {victim.name}", flush=True)
        # nginx tries a failed node again after fail_timeout (2 s), then it gets its share back.
        time.sleep(5)
        world.stopping.set()
        drivers = threads[len(sessions):]
        for thread in drivers:
            thread.join(timeout=10)
        # Every subscriber gets the last acknowledged events (5 s at most), then stops.
        deadline = time.monotonic() + RECOVERY_SECONDS
        while time.monotonic() < deadline and any((s.seen or 0) < s.last_acknowledged_event for s in sessions):
            time.sleep(0.05)
        world.unsubscribing.set()
        for thread in threads[:len(sessions)]:
            thread.join(timeout=10)

        # One request per session, with nobody else moving them: each is where nginx sends it.
        client = Client(arguments.nginx_port)
        for session in sessions:
            client.json("GET", f"/sessions/{session.id}/navigation", session.token)
        client.close()
        back = victim.metric("navd_sessions_open")
        print(f"cluster-test: {int(back)} of {len(sessions)} sessions moved back to {victim.name} "
              f"(it held {int(held[0])} before the kill)", flush=True)
        if back != held[0]:
            world.fail(f"{victim.name} holds {back} sessions after its return, not the {held[0]} it held before")
        # The hash's share of one node among three varies by run (6 of 45 has been seen): the
        # check above is the promise; this one only makes sure it was not an empty one.
        if not 1 <= back <= 0.7 * len(sessions):
            world.fail(f"{back} of {len(sessions)} sessions moved back: the check needs the node to have held some, not most")
        released = sum(node.metric("navd_sessions_released_total") for node in nodes[1:])
        if released < back:
            world.fail(f"the other nodes let go of {released} sessions, fewer than the {back} that moved back")

        # Nothing acknowledged is lost; every stream has everything.
        client = Client(arguments.nginx_port)
        for session in sessions:
            status, body = client.json("GET", f"/sessions/{session.id}", session.token)
            if status != 200:
                world.fail(f"{session.id}: GET answered {status} {body}")
                continue
            count, version = body["state"]["count"], body["version"]
            if not session.acknowledged <= count <= session.acknowledged + session.uncertain:
                world.fail(f"{session.id}: count {count}, but {session.acknowledged} increments were acknowledged "
                           f"and {session.uncertain} lost their answer")
            if version < session.version:
                world.fail(f"{session.id}: version {version} after {session.version} was acknowledged")
            if session.seen is None or session.seen < session.last_acknowledged_event:
                world.fail(f"{session.id}: its stream saw up to {session.seen}, not every acknowledged event "
                           f"(up to {session.last_acknowledged_event})")
        client.close()
    except Exception as error:  # a setup failure: reported like any other
        world.fail(f"{type(error).__name__}: {error}")
    finally:
        world.stopping.set()
        world.unsubscribing.set()
        for node in nodes:
            node.stop()
    acknowledged = sum(session.acknowledged for session in sessions) if "sessions" in locals() else 0
    for note, count in sorted(world.notes.items()):
        print(f"cluster-test: note: {count} {note}", flush=True)
    print(f"cluster-test: {len(nodes)} nodes, {acknowledged} acknowledged increments, "
          f"{len(world.failures)} failures; {time.monotonic() - started:.1f} s", flush=True)
    return 1 if world.failures else 0


if __name__ == "__main__":
    sys.exit(main())
