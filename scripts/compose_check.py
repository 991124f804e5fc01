#!/usr/bin/env python3
"""The end-to-end part of scripts/compose-check.sh, against deploy/compose.yaml brought up in
containers: everything goes through nginx on 127.0.0.1, and the containers are only killed,
started and read (their logs) with the engine's CLI.

A counter session is created and incremented, and its event stream followed. Then the navd
container that holds the session is killed (SIGKILL), and, while it is still down, the one that
took the session over; the session ends up on the third node. After each kill:

- the open stream closes (without `end`: the session is not over);
- the session answers through nginx again, with the count and version acknowledged before;
- a stream resumed with Last-Event-ID gets exactly the next events (no snapshot, no gap, no
  duplicate), and one resumed from the first snapshot replays every acknowledged event with the
  ids the actions were answered with;
- another node answers for it.

Last both containers are started again. They come back with new addresses, which nginx resolves
only when it starts or reloads (the README's several-nodes section says so): the check reloads it
(SIGHUP), as an operator would, and the session moves back to the node it started on (nginx's
consistent hash), still intact. scripts/cluster-test.sh checks the same promises with
processes and many sessions; this is the container topology, one session, every node in turn.

Waits are bounded but generous (CLAIM_SECONDS): a node that loads a session for the first time
opens a connection to PostgreSQL and so looks up the name `postgres`, which stalls for tens of
seconds on a container network whose gateway changed its MAC address after the node cached it
(a bridge without an address of its own, as netavark 1.4 makes; compose-check.sh pins it). Every
wait prints how long it took, and the nodes' session_unclaimable warnings are printed at the end.
scripts/cluster-test.sh holds the nodes to 5 s, without containers.

Python 3 standard library only. Exit code 0 when every check passed.
"""

import argparse
import json
import subprocess
import sys
import time
import uuid
from types import SimpleNamespace

from cluster_test import EventStream
from crash_test import CONNECTION_ERRORS, Client, Inconsistency

INCREMENT = {"target": "root", "action": "incrementButtonTapped"}
# The bound on anything that may wait for a node's first connection to PostgreSQL.
CLAIM_SECONDS = 90


class Failed(Exception):
    pass


def say(message):
    print(f"compose-check: {message}", flush=True)


def ok(message):
    say(f"ok: {message}")


class Topology:
    def __init__(self, engine, port, containers, nginx):
        self.engine, self.port, self.nginx = engine, port, nginx
        # navd service name -> container name
        self.containers = containers

    def call(self, method, path, token=None, body=None, headers=None, timeout=10):
        """(status, JSON body or text) of one request through nginx, on a connection of its own."""
        client = Client(self.port, timeout=timeout)
        try:
            return client.json(method, path, token, body, headers)
        finally:
            client.close()

    def expect(self, status, method, path, token=None, body=None, headers=None):
        got, answer = self.call(method, path, token, body, headers)
        if got != status:
            raise Failed(f"{method} {path} answered {got}, expected {status}: {str(answer)[:300]}")
        return answer

    def run(self, *arguments, timeout=30):
        return subprocess.run([self.engine, *arguments], check=True, capture_output=True, text=True, timeout=timeout)

    def holder(self, session, seconds=10):
        """The navd service whose log has this request: a GET tagged with an X-Request-ID of its own."""
        request_id = f"compose-check-{uuid.uuid4().hex}"
        self.expect(200, "GET", f"/sessions/{session.id}/navigation", session.token, headers={"X-Request-ID": request_id})
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            # The log is written by a thread of its own: the line may come a moment after the answer.
            found = [service for service, name in self.containers.items()
                     if request_id in self.logs(name)]
            if len(found) == 1:
                return found[0]
            if len(found) > 1:
                raise Failed(f"request {request_id} is in the logs of {found}")
            time.sleep(0.2)
        raise Failed(f"no navd container logged request {request_id} within {seconds} s")

    def healthy(self, name):
        """True when the container's navd answers its own health check, else None."""
        result = subprocess.run([self.engine, "exec", name, "navd", "--check-health"], capture_output=True, timeout=30)
        return True if result.returncode == 0 else None

    def address(self, name):
        return self.run("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", name).stdout.strip()

    def logs(self, name):
        result = subprocess.run([self.engine, "logs", name], capture_output=True, text=True, timeout=30)
        return result.stdout + result.stderr

    def unclaimable(self):
        """The reasons the nodes logged for sessions they could not load (session_unclaimable), counted."""
        reasons = {}
        for name in self.containers.values():
            for line in self.logs(name).splitlines():
                if '"event":"session_unclaimable"' in line:
                    try:
                        reason = json.loads(line).get("reason", "?")
                    except ValueError:
                        reason = line
                    reasons[reason] = reasons.get(reason, 0) + 1
        return reasons


def until(what, seconds, attempt):
    """(value, seconds taken): attempt() until it returns something other than None, within `seconds`."""
    started = time.monotonic()
    deadline = started + seconds
    last = None
    while time.monotonic() < deadline:
        try:
            value = attempt()
            if value is not None:
                return value, time.monotonic() - started
        except (Failed, subprocess.SubprocessError, *CONNECTION_ERRORS) as error:
            last = error
        time.sleep(0.2)
    raise Failed(f"{what} within {seconds} s" + (f" (last: {last})" if last else ""))


def open_stream(topology, session, last_event_id=None, seconds=30):
    """(stream, seconds taken): GET /sessions/{id}/events through nginx, again while it answers
    502 or 503 (a node gone, or one that could not reach PostgreSQL yet: nothing changed)."""
    def attempt():
        try:
            return EventStream(topology.port, session, last_event_id=last_event_id, timeout=seconds)
        except Inconsistency as refusal:
            if " 502" in str(refusal) or " 503" in str(refusal):
                raise Failed(str(refusal))
            raise
    return until(f"GET /sessions/{{id}}/events answered 200 through nginx", seconds, attempt)


def read_events(stream, count, seconds=10):
    """The next `count` events of a stream, each (id, event, data)."""
    events = []
    deadline = time.monotonic() + seconds
    while len(events) < count:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise Failed(f"{len(events)} of {count} events arrived within {seconds} s: {events}")
        event = stream.next_event(remaining)
        if event is not None:
            events.append(event)
    return events


def increment(topology, session, times):
    """Sends increments; checks each version is one more; returns the acknowledged event ids."""
    ids = []
    for _ in range(times):
        answer = topology.expect(200, "POST", f"/sessions/{session.id}/actions", session.token, INCREMENT)
        if answer["version"] != session.version + 1:
            raise Failed(f"version {answer['version']} after {session.version}: not one more")
        session.version = answer["version"]
        session.count += 1
        new = [event["id"] for event in answer["events"]]
        if not new:
            raise Failed("an increment answered no events")
        ids += new
    session.acknowledged += ids
    return ids


def expect_stream(stream, ids, what):
    """The stream's next events are exactly `ids`, none of them a snapshot."""
    events = read_events(stream, len(ids))
    got = [eid for eid, _, _ in events]
    kinds = {kind for _, kind, _ in events}
    if got != ids or "snapshot" in kinds or "end" in kinds:
        raise Failed(f"{what}: got {got} ({sorted(kinds)}), expected exactly {ids}")
    return events


def expect_closed(stream, seconds=10):
    """The stream ends (the node under it died) within `seconds`, without an `end` event."""
    deadline = time.monotonic() + seconds
    try:
        while time.monotonic() < deadline:
            event = stream.next_event(max(0.1, deadline - time.monotonic()))
            if event is not None and event[1] == "end":
                raise Failed(f"the stream got end {event[2]}: the session is not over")
    except CONNECTION_ERRORS:
        return
    finally:
        stream.close()
    raise Failed(f"the stream was still open {seconds} s after its node was killed")


def check_intact(topology, session, what):
    """GET /sessions/{id} answers with the acknowledged count and version."""
    state, took = until(f"GET /sessions/{{id}} answered 200 through nginx {what}", CLAIM_SECONDS,
                        lambda: topology.expect(200, "GET", f"/sessions/{session.id}", session.token))
    count, version = state["state"]["count"], state["version"]
    if (count, version) != (session.count, session.version):
        raise Failed(f"{what}: count {count}, version {version}; acknowledged count {session.count}, version {session.version}")
    ok(f"{what}: the session answers (after {took:.1f} s) with count {count} and version {version}, as acknowledged")


def check_resume(topology, session, what):
    """From the last event seen, a resumed stream gets exactly the next events; from the first
    snapshot, it replays every acknowledged event with the same ids."""
    resumed, _ = open_stream(topology, session, last_event_id=session.seen)
    try:
        ids = increment(topology, session, 2)
        expect_stream(resumed, ids, f"{what}: a stream resumed after {session.seen}")
        ok(f"{what}: a stream resumed with Last-Event-ID {session.seen} got exactly {ids}, no snapshot")
        session.seen = ids[-1]
    finally:
        resumed.close()
    replay, _ = open_stream(topology, session, last_event_id=session.snapshot)
    try:
        events = expect_stream(replay, session.acknowledged, f"{what}: a stream resumed after the snapshot {session.snapshot}")
        counts = [data["changes"]["count"] for _, kind, data in events if kind == "state" and "count" in data.get("changes", {})]
        if counts != list(range(session.initial + 1, session.count + 1)):
            raise Failed(f"{what}: the replayed counts are {counts}, not {session.initial + 1}…{session.count}")
        ok(f"{what}: a stream resumed after the snapshot ({session.snapshot}) replayed all "
           f"{len(events)} acknowledged events, ids {events[0][0]}…{events[-1][0]}, counts {session.initial + 1}…{session.count}")
    finally:
        replay.close()
    # A stream left open on the current holder, to see it close when that node is killed.
    return open_stream(topology, session, last_event_id=session.seen)[0]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--engine", required=True, help="podman or docker")
    parser.add_argument("--port", type=int, default=8080, help="nginx on 127.0.0.1")
    parser.add_argument("--container", action="append", required=True, metavar="SERVICE=NAME",
                        help="a navd service and its container, once per node")
    parser.add_argument("--nginx", required=True, help="nginx's container")
    arguments = parser.parse_args()
    containers = dict(item.split("=", 1) for item in arguments.container)
    topology = Topology(arguments.engine, arguments.port, containers, arguments.nginx)
    started = time.monotonic()
    killed = []
    try:
        created = topology.expect(201, "POST", "/sessions", body={"feature": "counter"})
        session = SimpleNamespace(id=created["id"], token=created["token"], version=created["version"],
                                  count=created["state"]["count"], initial=created["state"]["count"],
                                  acknowledged=[], snapshot=None, seen=None)
        ok(f"POST /sessions -> 201, session {session.id[:8]}…, version {session.version}")
        # The first request that names the session: the node nginx sends it to may have to load it.
        stream, took = open_stream(topology, session, seconds=CLAIM_SECONDS)
        (snapshot_id, kind, _), = read_events(stream, 1)
        if kind != "snapshot":
            raise Failed(f"a new stream began with {kind}, not a snapshot")
        session.snapshot = session.seen = snapshot_id
        ids = increment(topology, session, 3)
        expect_stream(stream, ids, "the first stream")
        session.seen = ids[-1]
        ok(f"a stream opened (after {took:.1f} s) with snapshot {snapshot_id}; "
           f"3 increments -> version {session.version}; the stream got {ids}")
        first = topology.holder(session)
        holder = first
        ok(f"{holder} holds the session (its log has the request)")

        addresses = {service: topology.address(name) for service, name in containers.items()}
        for round in (1, 2):
            topology.run("kill", containers[holder])
            killed.append(holder)
            say(f"killed {holder} ({containers[holder]}, SIGKILL)")
            expect_closed(stream)
            ok("the stream through nginx closed without `end`")
            check_intact(topology, session, f"after killing {holder}")
            moved = topology.holder(session)
            if moved in killed:
                raise Failed(f"{moved}, which was killed, answered for the session")
            ok(f"{moved} took the session over")
            holder = moved
            stream = check_resume(topology, session, f"on {holder}")
        stream.close()

        for service in killed:
            topology.run("start", containers[service])
            until(f"{service} healthy again", 60, lambda: topology.healthy(containers[service]))
            now = topology.address(containers[service])
            say(f"started {service} again: address {addresses[service]} before, {now} now")
        topology.run("kill", "--signal", "HUP", topology.nginx)
        say("reloaded nginx (SIGHUP): it resolves the nodes' names again")
        # nginx tries a node it marked failed again after fail_timeout (2 s).
        back, took = until(f"the session back on {first}", CLAIM_SECONDS,
                           lambda: (lambda now: now if now == first else None)(topology.holder(session)))
        ok(f"the session moved back to {back} (consistent hash) after {took:.1f} s")
        check_intact(topology, session, f"back on {back}")
        stream = check_resume(topology, session, f"back on {back}")
        stream.close()
        final = topology.expect(200, "GET", f"/sessions/{session.id}", session.token)
        say(f"final state {json.dumps(final['state'])}, version {final['version']}, "
            f"{len(session.acknowledged)} acknowledged events; {time.monotonic() - started:.1f} s")
        return 0
    except (Failed, Inconsistency, subprocess.SubprocessError, *CONNECTION_ERRORS) as error:
        say(f"FAIL: {type(error).__name__}: {error}")
        return 1
    finally:
        # Why a wait above was long, when a node said so (a refused claim changes nothing).
        try:
            for reason, count in topology.unclaimable().items():
                say(f"note: {count} x session_unclaimable: {reason}")
        except subprocess.SubprocessError:
            pass


if __name__ == "__main__":
    sys.exit(main())
