#!/usr/bin/env python3
"""kill -9 crash test for navd's durable store; scripts/crash-test.sh builds navd and runs this.

Client threads send actions, bindings, pushes, pops, dismissals and deep links to `counter`,
`app` and `wifi` sessions, another creates, increments and deletes sessions of its own, and
event-stream subscribers apply every event to their own copy of the tree. At a random moment
navd gets SIGKILL and is started again on the same data directory, many times. After every
restart, with no traffic, it checks what API.md's Durability section promises:

- every session whose 201 arrived answers 200 with its token, and one whose 204 arrived is gone;
- a counter's count is at least what was acknowledged and at most that plus the requests still
  in flight at the kill; a version is never below an acknowledged one;
- no effect is left half done (a fetch or a join running at the kill settles as if cancelled);
- a stream resuming with Last-Event-ID n gets n+1, n+2, ... with no gap and no duplicate, and
  no snapshot unless n is older than the server keeps (it never is here);
- no event id is issued twice with different content: every event seen (in a 2xx answer or on a
  stream) and the tree at every id (a snapshot's, or a subscriber's after that event) is kept per
  session across restarts and compared with whatever that id turns out to be later;
- every subscriber's tree, built by applying the events (full tree replica, as API.md defines
  snapshot/present/dismiss/push/pop/state), equals GET /sessions/{id}/navigation;
- the events acknowledged in the round replay from Last-Event-ID with the same ids and content.

Python 3 standard library only; everything on 127.0.0.1. Exit code 0 when nothing failed.
"""

import argparse
import collections
import hashlib
import http.client
import json
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback

# navd's default --event-buffer: a resume from further back than this may get a snapshot.
EVENT_BUFFER = 1024
# Refusals a client can earn by racing others: a stale target (409), an invalid pop or a network
# that a refresh just removed (422). Nothing else is expected from a healthy server.
EXPECTED_REFUSALS = {409, 422}
MAX_PATH = 8


class Inconsistency(Exception):
    pass


class StreamClosed(Exception):
    pass


# MARK: - Trees

def canonical(value):
    """A JSON value for comparison: 1.0 and 1 are the same number."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: canonical(item) for key, item in value.items()}
    if isinstance(value, list):
        return [canonical(item) for item in value]
    return value


def normalized(tree):
    """A navigation tree with sibling presentations in id order (their order carries no meaning)."""
    node = {key: canonical(value) for key, value in tree.items() if key not in ("presentations", "stacks")}
    node["presentations"] = sorted((normalized(child) for child in tree.get("presentations") or []), key=lambda n: n["id"])
    node["stacks"] = [{"id": stack["id"], "slot": stack["slot"],
                       "elements": [normalized(element) for element in stack.get("elements") or []]}
                      for stack in tree.get("stacks") or []]
    return node


def compact(value):
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(value):
    return hashlib.blake2b(compact(value).encode(), digest_size=12).hexdigest()


def first_difference(a, b, path="$"):
    """Where two JSON values first differ, for a failure message."""
    if type(a) is not type(b):
        return f"{path}: {compact(a)[:200]} != {compact(b)[:200]}"
    if isinstance(a, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}.{key}: present on one side only ({compact(a.get(key))[:200]} != {compact(b.get(key))[:200]})"
            found = first_difference(a[key], b[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{path}: {len(a)} items != {len(b)} items ({compact(a)[:300]} != {compact(b)[:300]})"
        for index, (x, y) in enumerate(zip(a, b)):
            found = first_difference(x, y, f"{path}[{index}]")
            if found:
                return found
        return None
    return None if a == b else f"{path}: {compact(a)[:200]} != {compact(b)[:200]}"


def walk(tree):
    """Every feature node of a normalized tree, with the stack it sits in (None if root or presented)."""
    found = []

    def visit(node, stack):
        found.append((node, stack))
        for child in node["presentations"]:
            visit(child, None)
        for inner in node["stacks"]:
            for element in inner["elements"]:
                visit(element, inner)

    visit(tree, None)
    return found


class Replica:
    """A client's copy of the navigation tree, built from a snapshot and the events after it, as
    API.md defines them. Strict: an event that does not fit the tree is an error, not a repair."""

    class Node:
        __slots__ = ("id", "attributes", "state", "presentations", "stacks", "owner")

    class Stack:
        __slots__ = ("id", "slot", "elements", "owner")

    def __init__(self, navigation):
        self.load(navigation)

    def load(self, navigation):
        self.features = {}
        self.stacks = {}
        self.root = self._build(navigation, None)

    def _build(self, data, owner):
        node = self._make(data, {"id", "state", "stacks", "presentations"}, owner)
        for child in data.get("presentations") or []:
            node.presentations.append(self._build(child, node))
        for stack, stack_data in zip(node.stacks, data.get("stacks") or []):
            for element in stack_data.get("elements") or []:
                stack.elements.append(self._build(element, node))
        return node

    def _make(self, data, node_keys, owner):
        fid, state = data.get("id"), data.get("state")
        if not isinstance(fid, str) or not isinstance(state, dict):
            raise Inconsistency(f"a feature needs an id and a state: {compact(data)[:300]}")
        if fid in self.features:
            raise Inconsistency(f"{fid} is already on screen")
        node = Replica.Node()
        node.id, node.state, node.owner = fid, dict(state), owner
        node.attributes = {key: value for key, value in data.items() if key not in node_keys}
        node.presentations, node.stacks = [], []
        for stack_data in data.get("stacks") or []:
            stack = Replica.Stack()
            stack.id, stack.slot, stack.elements, stack.owner = stack_data.get("id"), stack_data.get("slot"), [], node
            if not isinstance(stack.id, str) or stack.id in self.stacks:
                raise Inconsistency(f"stack {stack.id!r} of {fid} is malformed or already on screen")
            self.stacks[stack.id] = stack
            node.stacks.append(stack)
        self.features[fid] = node
        return node

    def _forget(self, node):
        if node.presentations or any(stack.elements for stack in node.stacks):
            raise Inconsistency(f"{node.id} removed before its own presentations and stack elements (rule 3)")
        del self.features[node.id]
        for stack in node.stacks:
            del self.stacks[stack.id]

    def apply(self, event, data):
        if event == "snapshot":
            if not isinstance(data.get("navigation"), dict):
                raise Inconsistency("snapshot without navigation")
            self.load(data["navigation"])
        elif event == "present":
            parent = self.features.get(data.get("parent"))
            if parent is None:
                raise Inconsistency(f"present: unknown parent in {compact(data)[:300]}")
            parent.presentations.append(self._make(data, {"id", "parent", "state", "stacks"}, parent))
        elif event == "dismiss":
            node = self.features.get(data.get("id"))
            if node is None or node.owner is None or node not in node.owner.presentations:
                raise Inconsistency(f"dismiss: {data.get('id')} is not presented")
            self._forget(node)
            node.owner.presentations.remove(node)
        elif event == "push":
            stack = self.stacks.get(data.get("stack"))
            if stack is None:
                raise Inconsistency(f"push: unknown stack in {compact(data)[:300]}")
            if data.get("index") != len(stack.elements):
                raise Inconsistency(f"push: index {data.get('index')} is not the top of {stack.id} ({len(stack.elements)} elements)")
            stack.elements.append(self._make(data, {"id", "stack", "index", "state", "stacks"}, stack.owner))
        elif event == "pop":
            stack, ids = self.stacks.get(data.get("stack")), data.get("ids")
            if stack is None or not isinstance(ids, list) or not ids:
                raise Inconsistency(f"pop: unknown stack or no ids in {compact(data)[:300]}")
            top = [element.id for element in reversed(stack.elements[-len(ids):])] if len(ids) <= len(stack.elements) else None
            if top != ids:
                raise Inconsistency(f"pop: {ids} are not the top of {stack.id} ({[e.id for e in stack.elements]})")
            for element in stack.elements[-len(ids):]:
                self._forget(element)
            del stack.elements[-len(ids):]
        elif event == "state":
            node, changes = self.features.get(data.get("feature")), data.get("changes")
            if node is None or not isinstance(changes, dict):
                raise Inconsistency(f"state: unknown feature in {compact(data)[:300]}")
            node.state.update(changes)
        else:
            raise Inconsistency(f"unexpected event {event}")

    def render(self, node=None):
        node = node or self.root
        out = {"id": node.id, **node.attributes, "state": node.state}
        out["presentations"] = [self.render(child) for child in node.presentations]
        out["stacks"] = [{"id": s.id, "slot": s.slot, "elements": [self.render(e) for e in s.elements]} for s in node.stacks]
        return out


# MARK: - HTTP

class EventStream:
    """GET /sessions/{id}/events on a raw socket: text/event-stream framing, read with deadlines.
    navd's own stream ends with its connection; through a proxy (nginx) it comes in chunks, which
    are undone here, the last one ending the stream."""

    def __init__(self, port, session, last_event_id=None, token_in_query=False, timeout=10.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buffer = b""
        # Chunked framing: the bytes not yet undone, and whether the last chunk came.
        self.chunked = False
        self.framed = b""
        self.ended = False
        path = f"/sessions/{session.id}/events"
        headers = ["Host: 127.0.0.1", "Accept: text/event-stream"]
        if token_in_query:
            path += f"?token={session.token}"
            if last_event_id is not None:
                path += f"&lastEventId={last_event_id}"
        else:
            headers.append(f"Authorization: Bearer {session.token}")
            if last_event_id is not None:
                headers.append(f"Last-Event-ID: {last_event_id}")
        self.sock.sendall(("\r\n".join([f"GET {path} HTTP/1.1"] + headers) + "\r\n\r\n").encode())
        deadline = time.monotonic() + timeout
        status_line = self._line(deadline)
        if status_line is None:
            raise StreamClosed("no answer to the stream request")
        head = []
        while True:
            line = self._line(deadline)
            if line is None:
                raise StreamClosed("the stream's head did not arrive")
            if not line:
                break
            head.append(line)
        parts = status_line.split(" ", 2)
        self.status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
        if self.status != 200:
            raise Inconsistency(f"GET {path.split('?')[0]} answered {status_line!r} {head}")
        if any(line.lower().startswith("transfer-encoding:") and "chunked" in line.lower() for line in head):
            self.chunked = True
            self.framed, self.buffer = self.buffer, b""
            self._unframe()

    def _unframe(self):
        """Moves whole chunks from `framed` to `buffer`."""
        while not self.ended:
            eol = self.framed.find(b"\r\n")
            if eol < 0:
                return
            size = int(self.framed[:eol].split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self.ended = True
                return
            if len(self.framed) < eol + 2 + size + 2:
                return
            self.buffer += self.framed[eol + 2:eol + 2 + size]
            self.framed = self.framed[eol + 2 + size + 2:]

    def _fill(self, deadline):
        """Reads more bytes; False when the deadline passes. StreamClosed at EOF (or the last
        chunk)."""
        if self.ended:
            raise StreamClosed("the server ended the stream")
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            return False
        if not chunk:
            raise StreamClosed("the server closed the stream")
        if self.chunked:
            self.framed += chunk
            self._unframe()
        else:
            self.buffer += chunk
        return True

    def _line(self, deadline):
        """One line of the response head without its end; None when the deadline passes."""
        while b"\n" not in self.buffer:
            if not self._fill(deadline):
                return None
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.rstrip(b"\r").decode()

    def next_event(self, timeout):
        """(id, event, data) or None when no whole event arrives within `timeout`. Comments
        (heartbeats) and `retry:` are skipped; a partly received event waits in the buffer."""
        deadline = time.monotonic() + timeout
        while True:
            end = self.buffer.find(b"\n\n")
            if end < 0:
                if not self._fill(deadline):
                    return None
                continue
            block, self.buffer = self.buffer[:end], self.buffer[end + 2:]
            fields = {}
            for line in block.decode().split("\n"):
                line = line.rstrip("\r")
                if not line or line.startswith(":"):
                    continue
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name in fields:
                    raise Inconsistency(f"an event with two {name} lines: {block[:300]!r}")
                fields[name] = value
            if "event" not in fields and "data" not in fields:
                continue
            if not {"id", "event", "data"} <= fields.keys():
                raise Inconsistency(f"an event without id, event or data: {fields}")
            try:
                return int(fields["id"]), fields["event"], json.loads(fields["data"])
            except ValueError as error:
                raise Inconsistency(f"an event that does not parse: {fields} ({error})")

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass


class Client:
    """One keep-alive connection; every request names its session's token."""

    def __init__(self, port, timeout=10):
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)

    def call(self, method, path, token=None, body=None, raw_body=None, headers=None):
        headers = dict(headers or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        data = raw_body
        if body is not None:
            data = json.dumps(body).encode()
        if data is not None:
            headers["Content-Type"] = "application/json"
        self.connection.request(method, path, body=data, headers=headers)
        response = self.connection.getresponse()
        text = response.read()
        return response.status, text

    def json(self, method, path, token=None, body=None, headers=None):
        status, text = self.call(method, path, token, body, headers=headers)
        try:
            return status, json.loads(text) if text else None
        except ValueError:
            return status, text.decode(errors="replace")

    def close(self):
        self.connection.close()


CONNECTION_ERRORS = (OSError, http.client.HTTPException, StreamClosed)


# MARK: - What is known about each session

class Session:
    def __init__(self, world, sid, token, feature, version, navigation, tracked=True):
        self.world, self.id, self.token, self.feature = world, sid, token, feature
        self.lock = threading.Lock()
        self.latest_tree = normalized(navigation)
        self.max_acked_version = version
        self.subscribers = []
        # Counter bookkeeping for the root `count` of counter sessions.
        self.count_base = 0
        self.acked_delta = 0
        self.uncertain_up = 0
        self.uncertain_down = 0
        self.tracked = tracked
        # Per event id: digest of (event, data), and of the normalized tree right after it.
        self.events = {}
        self.trees = {0: (digest(self.latest_tree), "the 201 answer")} if version == 0 else {}
        self.recent_texts = collections.OrderedDict()
        self.round_acked = {}
        # The lifecycle thread's own sessions.
        self.deleted = False
        self.delete_uncertain = False

    def label(self):
        return f"{self.feature} session {self.id}"

    def remember_text(self, key, text):
        self.recent_texts[key] = text
        if len(self.recent_texts) > 400:
            self.recent_texts.popitem(last=False)

    def observe_event(self, eid, event, data, where):
        """An event id seen anywhere: the same id must always carry the same event."""
        content = compact({"event": event, "data": canonical(data)})
        mark = digest(content)
        with self.lock:
            known = self.events.get(eid)
            if known is None:
                self.events[eid] = (mark, where)
                self.remember_text(("event", eid), content)
                return
        if known[0] != mark:
            before = self.recent_texts.get(("event", eid), "(no longer kept)")
            self.world.fail(f"{self.label()}: event id {eid} reused with different content: first {before[:300]} "
                            f"({known[1]}), now {content[:300]} ({where})")

    def observe_tree(self, eid, tree, where):
        """The tree as of event id `eid`: what a snapshot with that id shows, or a replica after it."""
        mark = digest(tree)
        with self.lock:
            known = self.trees.get(eid)
            if known is None:
                self.trees[eid] = (mark, where)
                self.remember_text(("tree", eid), compact(tree))
                return
        if known[0] != mark:
            before = self.recent_texts.get(("tree", eid))
            detail = first_difference(json.loads(before), tree) if before else "(first tree no longer kept)"
            self.world.fail(f"{self.label()}: event id {eid} stands for two different trees: first ({known[1]}), "
                            f"now ({where}); {detail}")

    def acknowledged(self, version, events, where):
        with self.lock:
            self.max_acked_version = max(self.max_acked_version, version)
        for item in events:
            self.observe_event(item["id"], item["event"], item["data"], where)
            with self.lock:
                self.round_acked[item["id"]] = compact({"event": item["event"], "data": canonical(item["data"])})
        self.world.count("events acknowledged", len(events))


# MARK: - The world: navd's process, phases, failures

class World:
    def __init__(self, seed):
        self.seed = seed
        self.cond = threading.Condition()
        self.stats_lock = threading.Lock()
        self.generation = 0
        self.port = None
        self.phase = "down"  # down -> check -> traffic -> killing -> down ...
        self.stopping = False
        self.busy = 0
        self.round = 0
        self.failures = []
        self.notes = collections.Counter()
        self.stats = collections.Counter()
        self.navd = None

    def fail(self, message):
        with self.stats_lock:
            self.failures.append((self.round, message))
        print(f"crash-test: FAIL (seed {self.seed}, round {self.round}): {message}", file=sys.stderr, flush=True)

    def note(self, what):
        with self.stats_lock:
            self.notes[what] += 1

    def count(self, key, amount=1):
        with self.stats_lock:
            self.stats[key] += amount

    def set_phase(self, phase, port=None):
        with self.cond:
            if port is not None:
                self.generation += 1
                self.port = port
            self.phase = phase
            self.cond.notify_all()

    def wait_up(self):
        """(generation, port) of a server that is up; None when stopping."""
        with self.cond:
            while not self.stopping and self.phase not in ("check", "traffic"):
                self.cond.wait()
            return None if self.stopping else (self.generation, self.port)

    def wait_next(self, generation):
        """After a failed connection to the server of `generation`: wait for its successor, or a
        moment if it is still up (a close that was not a kill)."""
        with self.cond:
            if not (generation != self.generation or self.phase in ("killing", "down")):
                self.cond.wait(0.05)
                return
            while not self.stopping and (self.generation == generation or self.phase not in ("check", "traffic")):
                self.cond.wait()

    def begin_work(self):
        with self.cond:
            while not self.stopping and self.phase != "traffic":
                self.cond.wait()
            if self.stopping:
                return None
            self.busy += 1
            return self.generation, self.port

    def end_work(self):
        with self.cond:
            self.busy -= 1
            self.cond.notify_all()

    def wait_idle(self, timeout):
        deadline = time.monotonic() + timeout
        with self.cond:
            while self.busy > 0:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self.cond.wait(remaining)
        return True

    def killed(self, generation):
        """Whether the server of `generation` has been killed (or is being): the kill is announced first."""
        with self.cond:
            return self.stopping or generation != self.generation or self.phase in ("killing", "down")

    def lost(self, generation, what, error, worker):
        """A connection failed. Expected when navd was killed; otherwise a failure (a client) or a
        server-side close to resume from (a stream)."""
        if self.killed(generation):
            return
        if self.navd and not self.navd.alive():
            self.fail(f"navd died on its own (exit {self.navd.proc.returncode}) during {what}: {error}")
        elif worker:
            self.fail(f"{what} failed while navd was up: {error!r}")
        else:
            self.note("streams closed by the server while up (resumed)")


class Navd:
    def __init__(self, binary, data_dir, work, world):
        self.binary, self.data_dir, self.work, self.world = binary, data_dir, work, world
        self.proc = None
        self.starts = 0
        self.stdout_log = open(os.path.join(work, "navd.stdout"), "ab")
        self.stderr_log = open(os.path.join(work, "navd.stderr"), "ab")

    def start(self):
        self.starts += 1
        for log in (self.stdout_log, self.stderr_log):
            log.write(f"--- start {self.starts}\n".encode())
            log.flush()
        self.proc = subprocess.Popen(
            [self.binary, "--port", "0", "--log-requests", "off", "--fact-base-url", "http://127.0.0.1:9",
             "--data-dir", self.data_dir, "--connect-delay-ms", "50"],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=self.stderr_log)
        with open(os.path.join(self.work, "navd.pid"), "w") as pid_file:
            pid_file.write(f"{self.proc.pid}\n")
        port = None
        lines = []
        deadline = time.monotonic() + 60
        while port is None:
            line = self.proc.stdout.readline()
            if not line or time.monotonic() > deadline:
                self.proc.kill()
                self.proc.wait()
                raise RuntimeError(f"navd did not start (exit {self.proc.returncode}); stdout {lines}; stderr:\n{self.stderr_tail()}")
            self.stdout_log.write(line)
            lines.append(line.decode(errors="replace").strip())
            try:
                message = json.loads(line)
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("event") == "listening":
                port = int(message["port"])
                wanted = os.environ.get("NAVD_IO")
                if wanted and message.get("io") != wanted:
                    self.proc.kill()
                    raise RuntimeError(f"navd runs on {message.get('io')}, not NAVD_IO={wanted}")
        self.stdout_log.flush()
        proc, log = self.proc, self.stdout_log
        threading.Thread(target=self._drain, args=(proc, log), daemon=True).start()
        return port, lines

    @staticmethod
    def _drain(proc, log):
        for line in proc.stdout:
            log.write(line)
        log.flush()

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def kill9(self):
        os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def stop(self):
        """SIGTERM, as an operator would: navd must exit 0 within 5 s."""
        if not self.alive():
            return None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return "timeout"

    def stderr_tail(self, lines=30):
        try:
            with open(os.path.join(self.work, "navd.stderr"), "rb") as log:
                return b"".join(log.readlines()[-lines:]).decode(errors="replace")
        except OSError:
            return ""


# MARK: - Subscribers

class Subscriber(threading.Thread):
    """Follows one session's event stream across restarts.

    `steady` subscribers stay connected and always resume with Last-Event-ID; `tab` subscribers
    behave like browser tabs that come and go: they open fresh streams (a snapshot) again and
    again, and when the server dies under them they resume from what they had, as EventSource does.
    """

    def __init__(self, world, session, kind, index, rng):
        super().__init__(name=f"{kind}-{session.feature}-{index}", daemon=True)
        self.world, self.session, self.kind, self.rng = world, session, kind, rng
        self.token_in_query = kind == "steady" and index % 2 == 1
        self.lock = threading.Lock()
        self.replica = None
        self.last = None
        self.generation = None  # the server generation the replica is current with
        self.tree = None

    def view(self):
        with self.lock:
            return self.generation, self.last, self.tree

    def run(self):
        try:
            self.follow()
        except Exception:
            self.world.fail(f"{self.name} crashed: {traceback.format_exc()}")

    def follow(self):
        resume = None
        while True:
            up = self.world.wait_up()
            if up is None:
                return
            generation, port = up
            if self.kind == "steady":
                resume = self.last
            try:
                stream = EventStream(port, self.session, resume, self.token_in_query)
            except CONNECTION_ERRORS as error:
                self.world.lost(generation, f"{self.name} opening a stream", error, worker=False)
                self.world.wait_next(generation)
                continue
            except Inconsistency as error:
                self.world.fail(f"{self.session.label()}, {self.name}: {error}")
                self.world.wait_next(generation)
                continue
            voluntary = False
            try:
                voluntary = self.read(stream, generation, resume)
            except CONNECTION_ERRORS as error:
                self.world.lost(generation, f"{self.name} reading its stream", error, worker=False)
            except Inconsistency as error:
                # Already a failure; start again from a snapshot so the rest of the run still checks.
                self.world.fail(f"{self.session.label()}, {self.name}: {error}")
                voluntary = True
            finally:
                stream.close()
            # A tab that left on its own comes back as a new tab; one whose server died resumes.
            resume = None if voluntary else self.last
            if voluntary:
                with self.lock:
                    self.replica, self.last, self.generation = None, None, None
                time.sleep(self.rng.uniform(0, 0.03))

    def read(self, stream, generation, resume):
        """Applies events until the stream ends; True when the subscriber left on its own."""
        session, world = self.session, self.world
        first = True
        leave_at = None
        if resume is not None:
            # Open on this server with everything up to `resume`: caught up unless more arrives.
            with self.lock:
                self.generation = generation
            world.count("resumes checked")
        while True:
            if self.kind == "tab" and first is False and leave_at is None and world.phase == "traffic":
                leave_at = time.monotonic() + self.rng.uniform(0.02, 0.3)
            if leave_at is not None and time.monotonic() >= leave_at:
                return True
            if world.stopping:
                return True
            item = stream.next_event(0.05)
            if item is None:
                continue
            eid, event, data = item
            where = f"{self.name} on navd #{world.navd.starts}, round {world.round}"
            if event == "end":
                raise Inconsistency(f"the session ended ({compact(data)}) though nobody deleted it")
            if first:
                first = False
                if event == "snapshot":
                    if resume is not None:
                        # Allowed only when `resume` is older than the server keeps.
                        if eid - resume <= EVENT_BUFFER:
                            older = "is below" if eid < resume else "is not below"
                            world.fail(f"{session.label()}, {self.name}: resumed with Last-Event-ID {resume} and got a "
                                       f"snapshot with id {eid} instead of event {resume + 1} (the server's last id "
                                       f"{older} the resumed one{'; an id issued before the crash was forgotten' if eid < resume else ''})")
                        else:
                            world.note("resumes older than the event buffer (snapshot)")
                    replica = Replica(data.get("navigation") or {})
                    with self.lock:
                        self.replica, self.last = replica, eid
                else:
                    if resume is None:
                        raise Inconsistency(f"a fresh stream began with {event} {eid}, not a snapshot")
                    if eid != resume + 1:
                        raise Inconsistency(f"resumed with Last-Event-ID {resume}, first event is {eid} ({event}): "
                                            f"{'a gap' if eid > resume + 1 else 'a duplicate'}")
                    self.apply(eid, event, data, where)
                if resume is None:
                    world.count("snapshots checked")
            else:
                if event == "snapshot":
                    raise Inconsistency(f"a snapshot (id {eid}) in the middle of a stream")
                if eid != self.last + 1:
                    raise Inconsistency(f"event {eid} ({event}) after {self.last}: "
                                        f"{'a gap' if eid > self.last + 1 else 'a duplicate or reordering'}")
                self.apply(eid, event, data, where)
            tree = normalized(self.replica.render())
            session.observe_tree(eid, tree, where)
            with self.lock:
                self.generation, self.tree = generation, tree
            if self.kind == "steady":
                session.latest_tree = tree

    def apply(self, eid, event, data, where):
        self.session.observe_event(eid, event, data, where)
        self.replica.apply(event, data)
        with self.lock:
            self.last = eid
        self.world.count("events checked")


# MARK: - Clients

def choose(rng, weighted):
    """One of [(weight, value)] at random."""
    total = sum(weight for weight, _ in weighted)
    pick = rng.uniform(0, total)
    for weight, value in weighted:
        pick -= weight
        if pick <= 0:
            return value
    return weighted[-1][1]


def pick_operation(rng, session):
    """A request a user of this session could make now, from the tree a subscriber last saw.

    Returns (method, path, body, counter_delta). Targets may be stale by the time it arrives:
    then the server answers 409 and nothing changes, which is part of the test.
    """
    base = f"/sessions/{session.id}"
    tree = session.latest_tree
    nodes = walk(tree)

    def action(target, name, args=None, delta=0):
        body = {"target": target, "action": name}
        if args is not None:
            body["args"] = args
        return ("POST", f"{base}/actions", body, delta)

    if session.feature == "counter" and rng.random() < 0.45:
        return action("root", "incrementButtonTapped", delta=1) if rng.random() < 0.8 else \
            action("root", "decrementButtonTapped", delta=-1)
    node, stack = rng.choice(nodes)
    feature = node.get("feature")
    depth = max((len(s["elements"]) for s in tree["stacks"]), default=0)
    options = []
    if feature == "counter":
        tracked = session.feature == "counter" and node["id"] == "root"
        options += [(3, action(node["id"], "incrementButtonTapped", delta=1 if tracked else 0)),
                    (1, action(node["id"], "decrementButtonTapped", delta=-1 if tracked else 0)),
                    (1, action(node["id"], "factButtonTapped")),
                    (2, action(node["id"], "settingsButtonTapped")),
                    (1, action(node["id"], "dismissFactButtonTapped"))]
    elif feature == "settings":
        options.append((3, ("PUT", f"{base}/features/{node['id']}/bindings/isOn", rng.random() < 0.5, 0)))
    elif feature == "app":
        if depth < MAX_PATH:
            options += [(2, action("root", "counterButtonTapped")), (1, action("root", "settingsButtonTapped"))]
        path = [rng.choice([{"counter": {"count": rng.randint(0, 9)}}, {"settings": {"isOn": rng.random() < 0.5}},
                            {"counter": {"destination": {"settings": {}}}}]) for _ in range(rng.randint(0, 3))]
        options.append((0.3, ("PUT", f"{base}/state", {"state": {"path": path}}, 0)))
    elif feature == "wifi":
        network = f"n{rng.randint(1, 5)}"
        options += [(3, action("root", "networkTapped", {"network": network})),
                    (1, action("root", "infoButtonTapped", {"network": network})),
                    (0.5, action("root", "refreshNetworks")),
                    (0.7, ("PUT", f"{base}/features/root/bindings/isOn", rng.random() < 0.7, 0))]
    elif feature == "connect":
        options += [(2, ("PUT", f"{base}/features/{node['id']}/bindings/password", rng.choice(["blob", "blob", "nope"]), 0)),
                    (2, action(node["id"], "joinButtonTapped"))]
    elif feature == "detail":
        options += [(2, action(node["id"], "forgetNetworkButtonTapped")),
                    (1, action(node["id"], "confirmForgetNetworkButtonTapped"))]
    if "slot" in node:
        buttons = [button["id"] for button in (node.get("alert") or {}).get("buttons") or []]
        body = {"button": rng.choice(buttons)} if buttons and rng.random() < 0.7 else None
        options.append((2, ("POST", f"{base}/presentations/{node['id']}/dismiss", body, 0)))
    if stack is not None:
        pop = rng.choice([None, {"count": 1}, {"count": rng.randint(1, 3)}, {"to": node["id"]}])
        options.append((2, ("POST", f"{base}/stacks/{stack['id']}/pop", pop, 0)))
    if session.feature == "app" and depth < MAX_PATH:
        value = rng.choice([{"counter": {"count": rng.randint(0, 9)}}, {"settings": {}}])
        options.append((1, ("POST", f"{base}/features/{node['id']}/push", {"value": value}, 0)))
    if not options:
        return action("root", "refreshNetworks") if session.feature == "wifi" else \
            action("root", "settingsButtonTapped") if session.feature == "counter" else \
            ("POST", f"{base}/stacks/{tree['stacks'][0]['id']}/pop", {"count": 1}, 0)
    return choose(rng, options)


class LoadThread(threading.Thread):
    """A thread of the load: one step at a time while navd runs, each on a client of the navd
    running now. A connection lost to a kill leaves the step's outcome unknown (the step has
    said what it left uncertain) and the client is made anew; a crash of its own fails the test."""

    def __init__(self, world, name):
        super().__init__(name=name, daemon=True)
        self.world = world
        self.working = False
        # What the step has in flight, for the report of a connection lost under it.
        self.in_flight = "a request"

    def run(self):
        try:
            self.work()
        except Exception:
            self.world.fail(f"{self.name} crashed: {traceback.format_exc()}")
            if self.working:
                self.world.end_work()

    def work(self):
        client, client_generation = None, None
        while True:
            started = self.world.begin_work()
            if started is None:
                return
            self.working = True
            generation, port = started
            if client_generation != generation:
                if client:
                    client.close()
                client, client_generation = Client(port), generation
            try:
                self.step(client, generation)
            except CONNECTION_ERRORS as error:
                self.world.lost(generation, self.in_flight, error, worker=True)
                self.world.count("requests in flight at a kill")
                client.close()
                client_generation = None
            self.working = False
            self.world.end_work()
            self.pause()

    def step(self, client, generation):
        raise NotImplementedError

    def pause(self):
        pass


class Worker(LoadThread):
    def __init__(self, world, sessions, index, rng):
        super().__init__(world, f"client-{index}")
        self.sessions, self.rng = sessions, rng

    def step(self, client, generation):
        session = self.rng.choice(self.sessions)
        method, path, body, delta = pick_operation(self.rng, session)
        if delta:
            with session.lock:
                if delta > 0:
                    session.uncertain_up += 1
                else:
                    session.uncertain_down += 1
        # Lost, the change may or may not have been made: it stays uncertain.
        self.in_flight = f"{method} {path}"
        raw = json.dumps(body).encode() if body is not None else None
        status, text = client.call(method, path, session.token, raw_body=raw)
        if delta:
            with session.lock:
                if delta > 0:
                    session.uncertain_up -= 1
                else:
                    session.uncertain_down -= 1
                if status == 200:
                    session.acked_delta += delta
        self.outcome(session, method, path, body, status, text, generation)

    def outcome(self, session, method, path, body, status, text, generation):
        world = self.world
        if status == 200:
            try:
                answer = json.loads(text)
                version, events = answer["version"], answer["events"]
            except (ValueError, KeyError, TypeError):
                world.fail(f"{method} {path} answered 200 with {text[:300]!r}")
                return
            session.acknowledged(version, events, f"{method} {path} answered on navd #{world.navd.starts}, round {world.round}")
            world.count("acknowledged changes")
        elif status in EXPECTED_REFUSALS:
            world.count(f"refused {status}")
        else:
            world.fail(f"{session.label()}: {method} {path} {compact(body) if body is not None else ''} answered "
                       f"{status}: {text[:300]!r}")


class Lifecycle(LoadThread):
    """Creates counter sessions (deep-linked to a count), increments them and deletes some: a 201
    must survive any crash after it, and a 204 must stay deleted."""

    def __init__(self, world, rng):
        super().__init__(world, "lifecycle")
        self.rng = rng
        self.lock = threading.Lock()
        self.sessions = []
        self.in_flight = "a lifecycle request"

    def snapshot(self):
        with self.lock:
            return list(self.sessions)

    def step(self, client, generation):
        alive = [s for s in self.snapshot() if not s.deleted and not s.delete_uncertain]
        roll = self.rng.random()
        if not alive or (roll < 0.25 and len(alive) < 30):
            self.create(client)
        elif roll < 0.4:
            self.delete(client, self.rng.choice(alive))
        else:
            self.increment(client, self.rng.choice(alive))

    def pause(self):
        time.sleep(0.005)

    def create(self, client):
        count = self.rng.randint(-50, 50)
        status, answer = client.json("POST", "/sessions", body={"feature": "counter", "state": {"count": count}})
        if status != 201 or not isinstance(answer, dict) or answer.get("state", {}).get("count") != count:
            self.world.fail(f"POST /sessions answered {status}: {str(answer)[:300]}")
            return
        session = Session(self.world, answer["id"], answer["token"], "counter", answer["version"], answer["navigation"])
        session.count_base = count
        with self.lock:
            self.sessions.append(session)
        self.world.count("acknowledged changes")
        self.world.count("sessions created")

    def delete(self, client, session):
        session.delete_uncertain = True
        status, text = client.call("DELETE", f"/sessions/{session.id}", session.token)
        session.delete_uncertain = False
        if status == 204:
            session.deleted = True
            self.world.count("acknowledged changes")
            self.world.count("sessions deleted")
        else:
            self.world.fail(f"DELETE /sessions/{session.id} answered {status}: {text[:300]!r}")

    def increment(self, client, session):
        with session.lock:
            session.uncertain_up += 1
        status, text = client.call("POST", f"/sessions/{session.id}/actions", session.token,
                                   body={"target": "root", "action": "incrementButtonTapped"})
        with session.lock:
            session.uncertain_up -= 1
            if status == 200:
                session.acked_delta += 1
        if status == 200:
            self.world.count("acknowledged changes")
            answer = json.loads(text)
            session.acknowledged(answer["version"], answer["events"], f"lifecycle increment, round {self.world.round}")
        else:
            self.world.fail(f"{session.label()}: increment answered {status}: {text[:300]!r}")


# MARK: - Checks after each restart

class Checker:
    def __init__(self, world, sessions, lifecycle):
        self.world, self.sessions, self.lifecycle = world, sessions, lifecycle
        self.reported = set()

    def run(self, port, generation):
        client = Client(port)
        try:
            self.check_metrics(client)
            for session in self.sessions:
                self.check_session(client, session, generation)
            for session in self.lifecycle.snapshot():
                self.check_lifecycle_session(client, session)
            with self.lifecycle.lock:
                self.lifecycle.sessions = [s for s in self.lifecycle.sessions if not s.deleted]
        finally:
            client.close()

    def check_metrics(self, client):
        status, text = client.call("GET", "/metrics")
        metrics = text.decode(errors="replace")
        if status != 200 or "\nnavd_sessions_unreadable 0\n" not in metrics or "\nnavd_store_available 1\n" not in metrics:
            lines = [line for line in metrics.splitlines() if line.startswith(("navd_sessions_", "navd_store_available"))]
            self.world.fail(f"after the restart /metrics answered {status}: {lines}")

    def described(self, client, session):
        status, answer = client.json("GET", f"/sessions/{session.id}", session.token)
        if status != 200:
            self.world.fail(f"{session.label()} was lost: GET answered {status} {str(answer)[:200]} after the restart")
            return None
        return answer

    def check_counter(self, session, count):
        with session.lock:
            if session.uncertain_up < 0 or session.uncertain_down < 0:
                self.world.fail(f"{session.label()}: bookkeeping went negative")
            low = session.count_base + session.acked_delta - session.uncertain_down
            high = session.count_base + session.acked_delta + session.uncertain_up
            detail = (f"count was {session.count_base} after the last restart, {session.acked_delta:+d} acknowledged since, "
                      f"+{session.uncertain_up}/-{session.uncertain_down} in flight at the kill")
            session.count_base, session.acked_delta, session.uncertain_up, session.uncertain_down = count, 0, 0, 0
        if not isinstance(count, int) or not low <= count <= high:
            self.world.fail(f"{session.label()}: count {count} is outside [{low}, {high}] ({detail}): "
                            f"{'an acknowledged change was lost' if isinstance(count, int) and count < low else 'a change appeared from nowhere'}")
        self.world.count("counters checked")

    def check_version(self, session, version):
        with session.lock:
            acked = session.max_acked_version
        if not isinstance(version, int) or version < acked:
            self.world.fail(f"{session.label()}: version {version} is below the acknowledged version {acked}")

    def check_settled(self, session, tree):
        for node, _ in walk(tree):
            state = node["state"]
            for flag in ("factIsLoading", "isConnecting"):
                if state.get(flag) is True and (session.id, node["id"], flag) not in self.reported:
                    self.reported.add((session.id, node["id"], flag))
                    self.world.fail(f"{session.label()}: {node.get('feature')} {node['id']} still has {flag}: true after "
                                    f"the restart; an effect running at the kill did not settle as if cancelled")

    def check_lifecycle_session(self, client, session):
        status, answer = client.json("GET", f"/sessions/{session.id}", session.token)
        if session.deleted:
            if status != 404:
                self.world.fail(f"{session.label()}: deleted with a 204 before the kill, GET answers {status} after it")
            return
        if status == 404 and session.delete_uncertain:
            session.deleted = True
            return
        session.delete_uncertain = False
        if status != 200:
            self.world.fail(f"{session.label()} (201 received) was lost: GET answered {status} {str(answer)[:200]}")
            session.deleted = True
            return
        self.check_version(session, answer.get("version"))
        self.check_counter(session, answer.get("state", {}).get("count"))
        with session.lock:
            session.round_acked = {}

    def fresh_snapshot(self, port, session):
        stream = EventStream(port, session)
        try:
            item = stream.next_event(10)
        finally:
            stream.close()
        if item is None or item[1] != "snapshot":
            raise Inconsistency(f"a fresh stream of {session.label()} began with {item!r}, not a snapshot")
        return item

    def check_session(self, client, session, generation):
        world = self.world
        described = self.described(client, session)
        if described is None:
            return
        if described.get("id") != session.id or described.get("feature") != session.feature:
            world.fail(f"{session.label()}: GET describes {described.get('feature')} {described.get('id')}")
        status, _ = client.call("GET", f"/sessions/{session.id}", "0" * 64)
        if status != 401:
            world.fail(f"{session.label()}: a wrong token got {status}, not 401, after the restart")
        self.check_version(session, described.get("version"))
        if session.feature == "counter":
            self.check_counter(session, described["state"].get("count"))
        # Quiescent: every subscriber reaches the server's last id and holds its tree.
        port = world.port
        for attempt in range(3):
            last, _, snapshot = self.fresh_snapshot(port, session)
            status, navigation = client.json("GET", f"/sessions/{session.id}/navigation", session.token)
            if status != 200:
                world.fail(f"{session.label()}: GET navigation answered {status}")
                return
            expected = normalized(navigation)
            session.observe_tree(last, normalized(snapshot["navigation"]), f"fresh snapshot after restart {world.navd.starts}")
            if normalized(snapshot["navigation"]) != expected:
                world.fail(f"{session.label()}: a fresh snapshot differs from GET navigation: "
                           f"{first_difference(normalized(snapshot['navigation']), expected)}")
            deadline = time.monotonic() + 15
            views = []
            while time.monotonic() < deadline:
                views = [(sub, sub.view()) for sub in session.subscribers]
                if all(view[0] == generation and view[1] is not None and view[1] >= last for _, view in views):
                    break
                time.sleep(0.01)
            again, _, _ = self.fresh_snapshot(port, session)
            if again == last:
                break
            world.note("sessions that moved on during a check (effects settling)")
        else:
            world.fail(f"{session.label()}: its last event id kept moving with no traffic")
            return
        for sub, (sub_generation, sub_last, tree) in views:
            if sub_generation != generation or sub_last != last:
                world.fail(f"{session.label()}: {sub.name} did not catch up within 15 s after the restart: it has event "
                           f"{sub_last} from navd start {sub_generation}, the server is at {last} (start {generation})")
            elif tree != expected:
                world.fail(f"{session.label()}: {sub.name}'s tree, built from the events, differs from GET navigation "
                           f"at event {last}: {first_difference(tree, expected)}")
            else:
                world.count("trees compared")
        self.check_settled(session, expected)
        self.check_replay(port, session, last)

    def open_last_tab(self, port, session):
        """Opens a fresh stream and returns (session, snapshot id, tree) as soon as its snapshot is
        in; the caller kills navd at once."""
        try:
            eid, event, data = self.fresh_snapshot(port, session)
        except (CONNECTION_ERRORS + (Inconsistency,)) as error:
            self.world.fail(f"{session.label()}: a new tab could not open its stream: {error}")
            return None
        tree = normalized(data["navigation"])
        session.observe_tree(eid, tree, f"the last tab's snapshot before kill {self.world.navd.starts}")
        self.world.count("snapshots checked")
        return session, eid, tree

    def resume_last_tab(self, port, session, resume, tree):
        """The tab of `open_last_tab` reconnects with Last-Event-ID: the id its snapshot carried
        must still be one the session issued, and what follows must fit its tree."""
        stream = EventStream(port, session, resume)
        try:
            item = stream.next_event(0.3)
        finally:
            stream.close()
        self.world.count("resumes checked")
        if item is None:
            return
        eid, event, data = item
        if event == "snapshot":
            self.world.fail(f"{session.label()}: a tab that got a snapshot with id {resume} just before the kill resumed "
                            f"with Last-Event-ID {resume} and got a snapshot with id {eid}: the restarted session "
                            f"{'forgot that id, and will issue it again for different events' if eid < resume else 'did not resume'}"
                            f" (the snapshot showed events that were not durable yet)")
        elif eid != resume + 1:
            self.world.fail(f"{session.label()}: resumed with Last-Event-ID {resume}, first event {eid} ({event})")

    def check_replay(self, port, session, last):
        """The events acknowledged in the round come back from Last-Event-ID, same ids, same content."""
        with session.lock:
            acked, session.round_acked = session.round_acked, {}
        if not acked:
            return
        start = min(acked) - 1
        missing = sorted(eid for eid in acked if eid > last)
        if missing:
            self.world.fail(f"{session.label()}: acknowledged event ids {missing[:10]} are beyond the restored last id {last}: "
                            f"acknowledged changes were lost")
        if last - start > EVENT_BUFFER:
            self.world.note("replays longer than the event buffer (skipped)")
            return
        stream = EventStream(port, session, start)
        try:
            expected_id = start + 1
            while expected_id <= last:
                item = stream.next_event(10)
                if item is None:
                    self.world.fail(f"{session.label()}: a replay from {start} stopped before event {expected_id} (last {last})")
                    return
                eid, event, data = item
                if eid != expected_id or event == "snapshot":
                    self.world.fail(f"{session.label()}: a replay from Last-Event-ID {start} gave {event} {eid}, expected event {expected_id}")
                    return
                content = compact({"event": event, "data": canonical(data)})
                if eid in acked and acked[eid] != content:
                    self.world.fail(f"{session.label()}: event {eid} was acknowledged as {acked[eid][:300]} before the kill "
                                    f"and replays as {content[:300]} after it")
                session.observe_event(eid, event, data, f"replay after restart {self.world.navd.starts}")
                self.world.count("events replayed")
                expected_id += 1
        finally:
            stream.close()


# MARK: - Main

def create_sessions(world, port, rng):
    client = Client(port)
    specs = [("counter", None), ("counter", {"count": 10}), ("counter", None),
             ("app", None), ("app", {"path": [{"counter": {}}, {"settings": {}}, {"counter": {"destination": {"settings": {}}}}]}),
             ("app", None),
             ("wifi", None), ("wifi", {"selectedNetworkID": "n2"}), ("wifi", None)]
    sessions = []
    for feature, state in specs:
        body = {"feature": feature}
        if state is not None:
            body["state"] = state
        status, answer = client.json("POST", "/sessions", body=body)
        if status != 201:
            raise RuntimeError(f"POST /sessions {body} answered {status}: {answer}")
        session = Session(world, answer["id"], answer["token"], feature, answer["version"], answer["navigation"])
        if feature == "counter":
            session.count_base = answer["state"]["count"]
        sessions.append(session)
    client.close()
    return sessions


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", required=True)
    parser.add_argument("--work", required=True, help="a scratch directory (data directory and navd's logs)")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--clients", type=int, default=6)
    parser.add_argument("--keep-going", action="store_true", help="go on after a round with failures")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1, 2**31)
    rng = random.Random(seed)
    world = World(seed)
    data_dir = os.path.join(args.work, "data")
    os.makedirs(data_dir, exist_ok=True)
    navd = Navd(args.binary, data_dir, args.work, world)
    world.navd = navd
    print(f"crash-test: seed {seed} (NAVD_CRASH_SEED={seed} repeats the choices; thread timing still varies), "
          f"{args.rounds} rounds, navd {args.binary}", flush=True)
    started = time.monotonic()
    threads = []
    exit_status = None
    try:
        port, _ = navd.start()
        sessions = create_sessions(world, port, rng)
        lifecycle = Lifecycle(world, random.Random(rng.random()))
        for session in sessions:
            for index in range(2):
                session.subscribers.append(Subscriber(world, session, "steady", index, random.Random(rng.random())))
            session.subscribers.append(Subscriber(world, session, "tab", 0, random.Random(rng.random())))
            threads += session.subscribers
        threads += [Worker(world, sessions, index, random.Random(rng.random())) for index in range(args.clients)]
        threads.append(lifecycle)
        checker = Checker(world, sessions, lifecycle)
        world.set_phase("check", port=port)
        for thread in threads:
            thread.start()
        checker.run(port, world.generation)  # before any traffic: the checks agree with a healthy server
        for round_number in range(1, args.rounds + 1):
            world.round = round_number
            world.set_phase("traffic")
            time.sleep(rng.uniform(0.2, 1.5))
            # Every other round on average, the kill comes just as a new tab's snapshot arrives:
            # what that snapshot shows (and its id) must be as durable as an acknowledged change.
            last_tab = None
            if rng.random() < 0.5:
                last_tab = checker.open_last_tab(port, rng.choice(sessions))
            world.set_phase("killing")
            navd.kill9()
            world.set_phase("down")
            world.count("kills")
            if not world.wait_idle(30):
                world.fail("clients still busy 30 s after the kill")
                break
            port, lines = navd.start()
            world.set_phase("check", port=port)
            checker.run(port, world.generation)
            if last_tab:
                checker.resume_last_tab(port, *last_tab)
            if world.failures and not args.keep_going:
                break
        world.round = args.rounds
        world.set_phase("down")
        exit_status = navd.stop()
        if exit_status != 0:
            world.fail(f"navd did not exit 0 on SIGTERM at the end (exit {exit_status})")
    except Exception:
        world.fail(f"the driver crashed: {traceback.format_exc()}")
    finally:
        with world.cond:
            world.stopping = True
            world.cond.notify_all()
        if navd.alive():
            navd.proc.kill()
            navd.proc.wait()
        for thread in threads:
            thread.join(timeout=5)
    elapsed = time.monotonic() - started
    stats = world.stats
    refusals = sum(count for key, count in stats.items() if key.startswith("refused"))
    print(f"crash-test: details: {stats['acknowledged changes']} acknowledged changes "
          f"({stats['sessions created']} sessions created, {stats['sessions deleted']} deleted, {refusals} refused as stale), "
          f"{stats['requests in flight at a kill']} requests in flight at a kill, {stats['events acknowledged']} events in 2xx answers, "
          f"{stats['events checked']} events applied by subscribers, {stats['events replayed']} replayed, "
          f"{stats['resumes checked']} resumes, {stats['snapshots checked']} fresh snapshots, "
          f"{stats['trees compared']} trees and {stats['counters checked']} counters compared; {elapsed:.1f} s", flush=True)
    for note, count in sorted(world.notes.items()):
        print(f"crash-test: note: {count} {note}", flush=True)
    if world.failures:
        print(f"crash-test: navd's stderr (last lines):\n{navd.stderr_tail()}", file=sys.stderr)
    events = stats["events checked"] + stats["events replayed"] + stats["events acknowledged"]
    print(f"crash-test: {stats['kills']} rounds, {stats['acknowledged changes']} acknowledged changes, {events} events checked, "
          f"{len(world.failures)} failures", flush=True)
    return 1 if world.failures else 0


if __name__ == "__main__":
    sys.exit(main())
