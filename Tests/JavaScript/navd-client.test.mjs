// Tests of navd's JavaScript client (Sources/WebClient/Resources/navd-client.js), with node:test:
//   node --test Tests/JavaScript/
// The event sequences in fixtures/ were recorded from a real navd (record-fixtures.py), each with
// the tree GET /sessions/{id}/navigation returned after every step. No server is needed here:
// the stream and fetch are fakes that replay those recordings.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
// As a browser loads it: one ES module from one file, whatever package.json says.
const source = readFileSync(`${here}/../../Sources/WebClient/Resources/navd-client.js`, "utf8");
const client = await import(`data:text/javascript;base64,${Buffer.from(source).toString("base64")}`);
const { NavigationMirror, MirrorError, NavdError, EventStreamParser, EventTooLargeError, ResponseTooLargeError, RequestTimeoutError, InvalidResponseError, NAVD_RETRY_MS, MIN_ADVISED_RETRY_MS, connect, createSession } = client;

const fixtures = readdirSync(`${here}/fixtures`)
  .filter((name) => name.endsWith(".json"))
  .map((name) => ({ name, ...JSON.parse(readFileSync(`${here}/fixtures/${name}`, "utf8")) }));
const TOKEN = "t0ken".repeat(12);

test("fixtures cover every event type", () => {
  const types = new Set(fixtures.flatMap((fixture) => fixture.events.map((event) => event.event)));
  assert.deepEqual([...types].sort(), [...client.EVENT_TYPES].sort());
  for (const fixture of fixtures) assert.equal(fixture.events.at(-1).event, "end", fixture.name);
});

for (const fixture of fixtures) {
  test(`${fixture.name}: the mirror equals GET /navigation after every step`, () => {
    const mirror = new NavigationMirror();
    for (const event of fixture.events) {
      mirror.apply(event.event, event.data);
      for (const checkpoint of fixture.checkpoints.filter((c) => c.through === event.id)) {
        assert.deepStrictEqual(mirror.tree, checkpoint.navigation, `${fixture.name} after ${checkpoint.step}`);
      }
    }
    assert.equal(mirror.ended, "deleted");
  });

  test(`${fixture.name}: a snapshot taken anywhere, then the rest, gives the same tree`, () => {
    // A fresh snapshot at a checkpoint is GET /navigation's tree (API.md, rule 7 and invariant 8).
    for (const checkpoint of fixture.checkpoints) {
      const mirror = new NavigationMirror();
      mirror.apply("snapshot", { version: 0, navigation: checkpoint.navigation });
      for (const event of fixture.events.filter((e) => e.id > checkpoint.through && e.event !== "end")) mirror.apply(event.event, event.data);
      assert.deepStrictEqual(mirror.tree, fixture.checkpoints.at(-1).navigation);
    }
  });
}

test("an event that does not fit the tree is refused and changes nothing", () => {
  const app = fixtures.find((f) => f.name === "app.json");
  const mirror = new NavigationMirror();
  mirror.apply("snapshot", app.events[0].data);
  for (const event of app.events.slice(1, 4)) mirror.apply(event.event, event.data);
  const before = structuredClone(mirror.tree);
  const stack = mirror.tree.stacks[0];
  const bad = [
    ["dismiss", { id: "p999", origin: "client" }],
    ["present", { id: "p1000", parent: "nobody", slot: "x", style: "sheet", feature: "fact", state: {}, stacks: [] }],
    ["push", { stack: stack.id, id: "e1000", index: 0, feature: "counter", state: {}, stacks: [] }],
    ["pop", { stack: stack.id, ids: [stack.elements[0].id], origin: "client" }],
    ["push", { stack: stack.id, id: stack.elements[0].id, index: stack.elements.length, feature: "counter", state: {}, stacks: [] }],
    ["state", { feature: "e1000", changes: { count: 1 } }],
    ["bogus", {}],
  ];
  for (const [type, data] of bad) {
    assert.throws(() => mirror.apply(type, data), MirrorError, type);
    assert.deepStrictEqual(mirror.tree, before, `${type} changed the tree`);
  }
});

/** A stream the client opened through the fake fetch, which the test feeds as navd would. */
class FakeStream {
  constructor(url, init) {
    this.url = url;
    this.headers = { ...init.headers };
    this.closed = false;
    this.cancelled = false;
    this.body = new ReadableStream({ start: (controller) => { this.controller = controller; }, cancel: () => { this.cancelled = true; } });
    init.signal?.addEventListener("abort", () => {
      this.closed = true;
      try {
        this.controller.error(new DOMException("aborted", "AbortError"));
      } catch {
        // already closed or broken
      }
    });
  }
  write(text) {
    this.controller.enqueue(new TextEncoder().encode(text));
  }
  send(event) {
    this.write(`id: ${event.id}\nevent: ${event.event}\ndata: ${JSON.stringify(event.data)}\n\n`);
  }
  end() {
    this.controller.close();
  }
  fail() {
    this.controller.error(new TypeError("network connection lost"));
  }
}

/**
 * A fetch that answers stream-ticket requests, opens a `FakeStream` for every event stream (or
 * answers `streamStatus` instead), answers `answer(url, init)` for the rest, and records every call.
 */
function fakeFetch(answer = () => [200, { version: 1, events: [] }], { streamStatus = () => 200 } = {}) {
  const calls = [];
  const streams = [];
  let tickets = 0;
  const reply = (status, body) => {
    const text = body === undefined ? "" : JSON.stringify(body);
    return { ok: status >= 200 && status < 300, status, statusText: "", headers: new Headers({ "Content-Type": "application/json" }), text: async () => text };
  };
  const fetcher = async (url, init) => {
    calls.push({ url, ...init, headers: { ...init.headers } });
    if (url.endsWith("/stream-tickets")) return reply(201, { ticket: `ticket${++tickets}`, expiresIn: 60 });
    if (url.includes("/events?")) {
      const status = streamStatus(url);
      if (status !== 200) return reply(status, { error: { code: status === 404 ? "session_not_found" : "unauthorized", message: "refused" } });
      const stream = new FakeStream(url, init);
      streams.push(stream);
      return { ok: true, status: 200, statusText: "OK", headers: new Headers({ "Content-Type": "text/event-stream; charset=utf-8" }), body: stream.body };
    }
    return reply(...answer(url, init));
  };
  return { fetcher, calls, streams };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 5));
async function until(condition) {
  for (let i = 0; i < 400 && !condition(); i++) await settle();
  assert.ok(condition(), "timed out");
}

for (const fixture of fixtures) {
  test(`${fixture.name}: a dropped stream resumes with a fresh ticket and lastEventId, missing nothing`, async () => {
    const events = fixture.events;
    for (let split = 1; split < events.length - 1; split++) {
      const { fetcher, calls, streams } = fakeFetch();
      const connections = [];
      const session = connect("http://navd.test/", {
        id: "s1", token: TOKEN, fetch: fetcher, retry: { initial: 1, max: 4 },
        onChange: (change) => change.kind === "connection" && connections.push(change.connection),
      });
      assert.equal(session.connection, "connecting");
      await until(() => streams.length === 1);
      const first = streams[0];
      assert.equal(first.url, "http://navd.test/sessions/s1/events?ticket=ticket1");
      events.slice(0, split).forEach((event) => first.send(event));
      await until(() => session.lastEventId === events[split - 1].id);
      first.fail();
      await until(() => streams.length === 2);
      assert.ok(first.closed, "a broken stream is closed, never read again");
      const second = streams[1];
      assert.equal(second.url, `http://navd.test/sessions/s1/events?ticket=ticket2&lastEventId=${events[split - 1].id}`);
      // The server sends nothing twice; were it to, the client would not apply it twice.
      second.send(events[split - 1]);
      events.slice(split).forEach((event) => second.send(event));
      await until(() => session.connection === "ended");
      assert.deepStrictEqual(session.tree, fixture.checkpoints.at(-1).navigation, `${fixture.name} split at ${split}`);
      assert.equal(session.endReason, "deleted");
      assert.ok(second.closed);
      assert.deepEqual(connections, ["open", "reconnecting", "open", "ended"]);
      for (const call of calls) {
        assert.ok(!call.url.includes(TOKEN), "the token is never in a URL");
        if (call.url.includes("/events?")) assert.equal(call.headers.Authorization, undefined, "a stream opens with its ticket alone");
        else assert.equal(call.headers.Authorization, `Bearer ${TOKEN}`);
      }
      assert.ok(!JSON.stringify(session).includes(TOKEN), "the token is not kept as a property");
      await settle();
      assert.equal(streams.length, 2, "nothing reconnects after end");
    }
  });
}

test("an event out of step starts over from a fresh snapshot", async () => {
  const counter = fixtures.find((f) => f.name === "counter.json");
  const errors = [];
  const { fetcher, streams } = fakeFetch();
  const session = connect("http://navd.test", {
    id: "s1", token: TOKEN, fetch: fetcher, retry: { initial: 1, max: 1 },
    onChange: (change) => change.kind === "error" && errors.push(change.error),
  });
  await until(() => streams.length === 1);
  streams[0].send(counter.events[0]);
  streams[0].send({ id: 1, event: "dismiss", data: { id: "p404", origin: "server" } });
  await until(() => errors.length === 1);
  assert.ok(errors[0] instanceof MirrorError);
  await until(() => streams.length === 2);
  assert.ok(streams[0].closed);
  assert.equal(streams[1].url, "http://navd.test/sessions/s1/events?ticket=ticket2", "no lastEventId: a snapshot");
  session.close();
  assert.equal(session.connection, "ended");
  assert.ok(streams[1].closed);
});

test("by default a broken stream waits navd's retry: advice before it reconnects", async () => {
  const counter = fixtures.find((f) => f.name === "counter.json");
  const { fetcher, streams } = fakeFetch();
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher });
  await until(() => streams.length === 1);
  streams[0].send(counter.events[0]);
  await until(() => session.tree !== null);
  streams[0].fail();
  await until(() => session.connection === "reconnecting");
  assert.ok(session.timer !== null);
  // With jitter the first wait is 3 s × 0.75 at least; a second later nothing has reopened.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  assert.equal(streams.length, 1, "reconnected before navd's retry: 3000");
  assert.equal(NAVD_RETRY_MS, 3000);
  session.close();
});

test("a retry: line sets the first wait, as EventSource would", async () => {
  const counter = fixtures.find((f) => f.name === "counter.json");
  const { fetcher, streams } = fakeFetch();
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher });
  await until(() => streams.length === 1);
  streams[0].write("retry: 700\n\n");
  streams[0].send(counter.events[0]);
  await until(() => session.tree !== null);
  assert.equal(session.retry.initial, 700);
  const broke = Date.now();
  streams[0].fail();
  await until(() => streams.length === 2);
  // 700 ms with jitter is at most 875; the default 3 s would be at least 2,250.
  assert.ok(Date.now() - broke < 2000, "waited the default 3 s despite retry: 700");
  // A caller's own choice is kept whatever the server advises.
  const chosen = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher, retry: { initial: 7 } });
  await until(() => streams.length === 3);
  streams[2].write("retry: 700\n\n");
  streams[2].send(counter.events[0]);
  await until(() => chosen.tree !== null);
  assert.equal(chosen.retry.initial, 7);
  session.close();
  chosen.close();
});

test("a stream that answers starts the back-off over, even with no event; retry: 0 is no busy loop", async () => {
  const { fetcher, streams } = fakeFetch();
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher, retry: { initial: 1, max: 60000 } });
  // Streams that open, send only a comment, and break: as a quiet session across restarts.
  for (let round = 1; round <= 6; round++) {
    await until(() => streams.length === round);
    streams[round - 1].write(":\n");
    await until(() => session.attempt === 0);
    streams[round - 1].fail();
  }
  await until(() => streams.length === 7);
  assert.ok(session.attempt <= 1, `the back-off kept growing: attempt ${session.attempt}`);
  session.close();

  const advised = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher });
  await until(() => streams.length === 8);
  streams[7].write("retry: 0\n\n");
  await until(() => advised.attempt === 0 && advised.retry.initial !== NAVD_RETRY_MS);
  assert.equal(advised.retry.initial, MIN_ADVISED_RETRY_MS);
  advised.close();
});

test("closing from a connection listener leaves no timer running", async () => {
  const { fetcher, streams } = fakeFetch();
  const onOpen = connect("http://navd.test", {
    id: "s1", token: TOKEN, fetch: fetcher,
    onChange: (change, session) => change.connection === "open" && session.close(),
  });
  await until(() => onOpen.connection === "ended");
  assert.equal(onOpen.watchdog, null, "the idle timer outlived close()");
  assert.equal(onOpen.timer, null);
  assert.ok(streams.at(-1).closed);

  const onReconnecting = connect("http://navd.test", {
    id: "s1", token: TOKEN, fetch: fetcher,
    onChange: (change, session) => change.connection === "reconnecting" && session.close(),
  });
  await until(() => streams.length === 2);
  streams[1].fail();
  await until(() => onReconnecting.connection === "ended");
  await settle();
  assert.equal(onReconnecting.timer, null, "the reconnection timer outlived close()");
  assert.equal(onReconnecting.watchdog, null);
});

test("a stream that falls silent is replaced; heartbeat comments keep it", async () => {
  const counter = fixtures.find((f) => f.name === "counter.json");
  const { fetcher, streams } = fakeFetch();
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher, idleTimeout: 120, retry: { initial: 1, max: 1 } });
  await until(() => streams.length === 1);
  streams[0].send(counter.events[0]);
  // Comments only, each within the timeout: the stream is alive, though no event comes.
  for (let beat = 0; beat < 8; beat++) {
    await new Promise((resolve) => setTimeout(resolve, 40));
    streams[0].write(":\n");
  }
  assert.equal(streams.length, 1, "a stream with heartbeats was replaced");
  assert.equal(session.connection, "open");
  // Then silence, as from a peer that vanished without closing: the client notices and resumes.
  await until(() => streams.length === 2);
  assert.ok(streams[0].closed, "the silent stream is closed");
  assert.equal(streams[1].url, `http://navd.test/sessions/s1/events?ticket=ticket2&lastEventId=${counter.events[0].id}`);
  session.close();
});

test("a stream that closes without end (navd shutting down) resumes", async () => {
  const counter = fixtures.find((f) => f.name === "counter.json");
  const { fetcher, streams } = fakeFetch();
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher, retry: { initial: 1, max: 1 } });
  await until(() => streams.length === 1);
  streams[0].send(counter.events[0]);
  streams[0].send(counter.events[1]);
  await until(() => session.lastEventId === counter.events[1].id);
  streams[0].end();
  await until(() => streams.length === 2);
  assert.equal(streams[1].url, `http://navd.test/sessions/s1/events?ticket=ticket2&lastEventId=${counter.events[1].id}`);
  session.close();
});

test("events split anywhere across reads, in any line ending, arrive whole; unknown types are skipped", async () => {
  const counter = fixtures.find((f) => f.name === "counter.json");
  const { fetcher, streams } = fakeFetch();
  const seen = [];
  const session = connect("http://navd.test", {
    id: "s1", token: TOKEN, fetch: fetcher,
    onChange: (change) => change.kind === "event" && seen.push(change.event.id),
  });
  await until(() => streams.length === 1);
  const endings = ["\n", "\r\n", "\r"];
  const events = counter.events.filter((event) => event.event !== "end");
  let text = ": hello\r\n\r\nevent: future\ndata: {}\n\n";
  events.forEach((event, index) => {
    const eol = endings[index % endings.length];
    text += `id: ${event.id}${eol}event: ${event.event}${eol}data: ${JSON.stringify(event.data)}${eol}${eol}`;
  });
  // Three characters at a time: a read may end between CR and LF, or inside a field name.
  for (let at = 0; at < text.length; at += 3) streams[0].write(text.slice(at, at + 3));
  await until(() => seen.length === events.length);
  assert.deepEqual(seen, events.map((event) => event.id));
  // And all at once, as one read.
  const whole = new EventStreamParser().push(text);
  assert.deepEqual(whole.filter((event) => event.type !== "future").map((event) => Number(event.id)), events.map((event) => event.id));
  assert.equal(streams.length, 1, "nothing broke");
  session.close();
});

test("an event longer than maxEventLength ends the session's mirror, unread", async () => {
  const counter = fixtures.find((f) => f.name === "counter.json");
  const { fetcher, streams } = fakeFetch();
  const limit = JSON.stringify(counter.events[0].data).length + 20;
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher, maxEventLength: limit });
  await until(() => streams.length === 1);
  streams[0].send(counter.events[0]);
  await until(() => session.tree !== null);
  // Not yet a whole event, and never to be one: the client stops reading at the limit.
  streams[0].write(`id: 99\nevent: state\ndata: {"feature":"root","changes":{"count":"${"9".repeat(limit)}`);
  await until(() => session.connection === "ended");
  assert.equal(session.endReason, "eventTooLarge");
  assert.ok(streams[0].closed);
  assert.notEqual(session.lastEventId, 99);
});

test("a stream refused as gone ends the connection; a spent ticket is replaced", async () => {
  let refusals = [401, 404];
  const { fetcher, streams, calls } = fakeFetch(undefined, { streamStatus: () => refusals.shift() ?? 200 });
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher, retry: { initial: 1, max: 1 } });
  await until(() => session.connection === "ended");
  assert.equal(session.endReason, "gone");
  assert.deepEqual(calls.filter((call) => call.url.endsWith("/stream-tickets")).length, 2, "a 401 stream was retried with a new ticket");
  assert.equal(streams.length, 0);
});

test("a session that is gone ends the connection; a server that is down is retried", async () => {
  let down = 2;
  const calls = [];
  const fetcher = async (url, init) => {
    calls.push(url);
    if (down-- > 0) throw new TypeError("connection refused");
    return { ok: false, status: 404, statusText: "", text: async () => JSON.stringify({ error: { code: "session_not_found", message: "no session s1" } }) };
  };
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher, retry: { initial: 1, max: 2 } });
  await until(() => session.connection === "ended");
  assert.equal(session.endReason, "gone");
  assert.equal(calls.length, 3);
  assert.ok(calls.every((url) => url.endsWith("/stream-tickets")));
});

test("a stream answer without a body is a broken stream, not an error nothing catches", async () => {
  const { fetcher: base, streams } = fakeFetch();
  let bodiless = 1;
  const fetcher = async (url, init) => {
    if (url.includes("/events?") && bodiless-- > 0) {
      return { ok: true, status: 204, statusText: "", headers: new Headers({ "Content-Type": "text/event-stream" }), body: null };
    }
    return base(url, init);
  };
  const rejections = [];
  const onRejection = (reason) => rejections.push(reason);
  process.on("unhandledRejection", onRejection);
  try {
    const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher, retry: { initial: 1, max: 2 } });
    await until(() => streams.length === 1);
    session.close();
    await settle();
    assert.deepEqual(rejections, []);
  } finally {
    process.off("unhandledRejection", onRejection);
  }
});

test("an idle timeout past what setTimeout keeps does not drop every stream at once", async () => {
  const { fetcher, streams } = fakeFetch();
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher, idleTimeout: Infinity, retry: { initial: 1, max: 2 } });
  await until(() => streams.length === 1);
  await new Promise((resolve) => setTimeout(resolve, 50));
  assert.equal(streams.length, 1);
  assert.equal(session.connection, "open");
  session.close();
});

test("a mirror that keeps falling out of step backs off, though every stream answers", async () => {
  const counter = fixtures.find((f) => f.name === "counter.json");
  const { fetcher, streams } = fakeFetch();
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher, retry: { initial: 1, max: 60000 } });
  for (let round = 1; round <= 6; round++) {
    await until(() => streams.length === round);
    streams[round - 1].send(counter.events[0]);
    streams[round - 1].send({ id: 1, event: "dismiss", data: { id: "p404", origin: "server" } });
  }
  await until(() => session.outOfStep === 6);
  // The sixth wait is 2⁶ ms or more, not the 1 ms a fresh stream's answer would have reset it to.
  const started = Date.now();
  await until(() => streams.length === 7);
  assert.ok(Date.now() - started >= 40, `reconnected after ${Date.now() - started} ms`);
  // Back in step: an event past the snapshot starts it over.
  streams[6].send(counter.events[0]);
  streams[6].send(counter.events[1]);
  await until(() => session.outOfStep === 0);
  session.close();
});

test("a presentation or push may not bring a stack id already on screen; nor may a snapshot repeat one", () => {
  const mirror = new NavigationMirror();
  mirror.apply("snapshot", { version: 1, navigation: { id: "root", feature: "app", state: {}, presentations: [], stacks: [{ id: "s1", slot: "path", elements: [] }] } });
  const before = structuredClone(mirror.tree);
  assert.throws(() => mirror.apply("present", { id: "p1", parent: "root", slot: "d", style: "sheet", feature: "f", state: {}, stacks: [{ id: "s1", slot: "path" }] }), MirrorError);
  assert.throws(() => mirror.apply("push", { stack: "s1", id: "e1", index: 0, feature: "f", state: {}, stacks: [{ id: "s2", slot: "a" }, { id: "s2", slot: "b" }] }), MirrorError);
  assert.deepStrictEqual(mirror.tree, before);
  assert.throws(() => mirror.apply("snapshot", { version: 2, navigation: { id: "root", feature: "app", state: {}, stacks: [{ id: "s1", slot: "a", elements: [] }, { id: "s1", slot: "b", elements: [] }] } }), MirrorError);
});

test("a byte order mark opening the stream is skipped; one later on is text", () => {
  const parser = new EventStreamParser();
  assert.deepEqual([...parser.push("\uFEFFdata: a\n\n"), ...parser.push("\uFEFFdata: b\n\ndata: c\n\n")].map((event) => event.data), ["a", "c"]);
});

test("an event's data lines are kept as one string: empty lines count a character each", () => {
  const parser = new EventStreamParser({ maxEventLength: 1000 });
  const [event] = parser.push("data:\n".repeat(900) + "\n");
  assert.equal(event.data, "\n".repeat(899));
  assert.throws(() => new EventStreamParser({ maxEventLength: 1000 }).push("data:\n".repeat(1200)), EventTooLargeError);
});

test("the parser follows the standard: fields, comments, ids, retry and empty events", () => {
  const parser = new EventStreamParser();
  const events = parser.push("data\n\ndata:a\ndata: b\nid: 7\nretry: x1\n\n:comment\nevent: e\n\nid\0x: 3\nid: 8\0\ndata\n\nretry: 250\n\n");
  assert.deepEqual(events, [
    { type: "message", data: "", lastEventId: "", id: null },
    { type: "message", data: "a\nb", lastEventId: "7", id: "7" },
    // `event: e` alone has no data and is not dispatched; an id with NUL is ignored, and the
    // last event id carries over to an event without one of its own.
    { type: "message", data: "", lastEventId: "7", id: null },
  ]);
  // A chunk that is empty keeps a CR's pending LF pending.
  const split = new EventStreamParser();
  assert.deepEqual([...split.push("data: x\r"), ...split.push(""), ...split.push("\n\r\n")].map((event) => event.data), ["x"]);
  assert.equal(parser.retry, 250);
  assert.throws(() => new EventStreamParser({ maxEventLength: 10 }).push("data: 0123456789"), EventTooLargeError);
  assert.throws(() => new EventStreamParser({ maxEventLength: 10 }).push("data: 01234\ndata: 56789\n"), EventTooLargeError);
});

test("every mutating endpoint, with If-Match and errors", async () => {
  let version = 4;
  const { fetcher, calls } = fakeFetch((url, init) => {
    if (init.headers["If-Match"] === '"1"') return [412, { error: { code: "precondition_failed", message: "version is 5" } }];
    if (init.method === "DELETE") return [204, undefined];
    return [200, { version: ++version, events: [] }];
  });
  const session = connect("http://navd.test", { id: "s 1", token: TOKEN, fetch: fetcher });
  await session.perform("root", "networkTapped", { network: "n2" }, { ifMatch: 4, wait: true });
  await session.bind("p2", "password", "blob");
  await session.dismiss("p3", { button: "forget" });
  await session.dismiss("p4");
  await session.pop("s1", { count: 2 });
  await session.pop("s1", { to: "e3" });
  await session.push("e1", { settings: {} });
  await session.replaceState({ path: [] });
  await session.end();
  await assert.rejects(session.perform("root", "incrementButtonTapped", undefined, { ifMatch: 1 }), (error) => {
    assert.ok(error instanceof NavdError);
    return error.status === 412 && error.code === "precondition_failed";
  });
  const made = calls.filter((call) => !call.url.endsWith("/stream-tickets") && !call.url.includes("/events?"))
    .map((call) => [call.method, call.url.replace("http://navd.test/sessions/s%201", ""), call.body === undefined ? null : JSON.parse(call.body), call.headers["If-Match"] ?? null]);
  assert.deepEqual(made, [
    ["POST", "/actions?wait=true", { target: "root", action: "networkTapped", args: { network: "n2" } }, '"4"'],
    ["PUT", "/features/p2/bindings/password", "blob", null],
    ["POST", "/presentations/p3/dismiss", { button: "forget" }, null],
    ["POST", "/presentations/p4/dismiss", null, null],
    ["POST", "/stacks/s1/pop", { count: 2 }, null],
    ["POST", "/stacks/s1/pop", { to: "e3" }, null],
    ["POST", "/features/e1/push", { value: { settings: {} } }, null],
    ["PUT", "/state", { state: { path: [] } }, null],
    ["DELETE", "", null, null],
    ["POST", "/actions", { target: "root", action: "incrementButtonTapped" }, '"1"'],
  ]);
  assert.equal(session.version, 12);
  for (const call of calls.filter((call) => !call.url.includes("/events?"))) assert.equal(call.headers.Authorization, `Bearer ${TOKEN}`);
  session.close();
});

for (const fixture of fixtures) {
  test(`${fixture.name}: a mutation's own events are in the tree when it resolves, and not applied twice`, async () => {
    const events = fixture.events.filter((event) => event.event !== "end");
    // Each step's events answer one mutation, as if this client made every change.
    for (let split = 1; split < events.length; split++) {
      const own = events.slice(split, split + 3);
      const { fetcher, streams } = fakeFetch(() => [200, { version: 1, events: own }]);
      const changes = [];
      const session = connect("http://navd.test", {
        id: "s1", token: TOKEN, fetch: fetcher, onChange: (change) => change.kind === "event" && changes.push(change.event.id),
      });
      try {
        await until(() => streams.length === 1);
        events.slice(0, split).forEach((event) => streams[0].send(event));
        await until(() => session.lastEventId === events[split - 1].id);
        await session.perform("root", "incrementButtonTapped");
        const expected = new NavigationMirror();
        events.slice(0, split + own.length).forEach((event) => expected.apply(event.event, event.data));
        assert.deepStrictEqual(session.tree, expected.tree, `${fixture.name}: its events applied at ${split}`);
        assert.equal(session.lastEventId, own.at(-1).id);
        // The stream brings them too, then what follows: each applied once.
        events.slice(split).forEach((event) => streams[0].send(event));
        await until(() => session.lastEventId === events.at(-1).id);
        assert.deepStrictEqual(session.tree, fixture.checkpoints.at(-1).navigation);
        assert.deepEqual(changes, events.map((event) => event.id), "every event once, in order");
        assert.equal(session.connection, "open");
      } finally {
        session.close();
      }
    }
  });
}

test("a mutation's events that do not follow on from the tree are left to the stream", async () => {
  const counter = fixtures.find((f) => f.name === "counter.json");
  const [snapshot, first, second] = counter.events;
  // Another client's change (`first`) is still on its way when this one's answer arrives.
  const { fetcher, streams } = fakeFetch(() => [200, { version: 2, events: [second] }]);
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher });
  try {
    await until(() => streams.length === 1);
    streams[0].send(snapshot);
    await until(() => session.lastEventId === snapshot.id);
    const answer = await session.perform("root", "factButtonTapped");
    assert.deepEqual(answer.events, [second]);
    assert.deepStrictEqual(session.tree, snapshot.data.navigation, "nothing applied out of order");
    assert.equal(session.lastEventId, snapshot.id);
    streams[0].send(first);
    streams[0].send(second);
    await until(() => session.lastEventId === second.id);
    const expected = new NavigationMirror();
    [snapshot, first, second].forEach((event) => expected.apply(event.event, event.data));
    assert.deepStrictEqual(session.tree, expected.tree);
  } finally {
    session.close();
  }
});

test("a mutation's event that does not fit the tree is left to the stream, and the answer stays the caller's", async () => {
  const counter = fixtures.find((f) => f.name === "counter.json");
  const [snapshot, first] = counter.events;
  const misfit = { id: first.id, event: "dismiss", data: { id: "p404", origin: "server" } };
  let answers = [{ version: 1, events: [misfit] }, { version: 1, events: [first] }];
  const errors = [];
  const { fetcher, streams } = fakeFetch(() => [200, answers.shift()]);
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher, onChange: (change) => change.kind === "error" && errors.push(change) });
  try {
    await until(() => streams.length === 1);
    streams[0].send(snapshot);
    await until(() => session.lastEventId === snapshot.id);
    await session.perform("root", "incrementButtonTapped");
    assert.deepStrictEqual(session.tree, snapshot.data.navigation, "nothing applied");
    assert.equal(session.lastEventId, snapshot.id);
    assert.deepEqual(errors, [], "no start over for an answer's event");
    assert.equal(streams.length, 1);
    const answer = await session.perform("root", "incrementButtonTapped");
    assert.equal(session.lastEventId, first.id, "a fitting one is applied");
    const before = structuredClone(session.tree);
    answer.events[0].data.changes.count = 999;
    assert.deepStrictEqual(session.tree, before, "changing the answer does not change the tree");
  } finally {
    session.close();
  }
});

test("waitTimeout bounds a wait with navd's ?timeout=, and only a wait", async () => {
  const { fetcher, calls } = fakeFetch();
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher, waitTimeout: 2500 });
  try {
    await session.perform("root", "factButtonTapped", undefined, { wait: true });
    await session.perform("root", "incrementButtonTapped");
    const made = calls.filter((call) => call.url.includes("/actions")).map((call) => call.url.replace("http://navd.test/sessions/s1", ""));
    assert.deepEqual(made, ["/actions?wait=true&timeout=2.5", "/actions"]);
  } finally {
    session.close();
  }
});

test("a request with no whole answer within requestTimeout throws RequestTimeoutError; a wait gets its bound on top", async () => {
  const signals = [];
  const { fetcher } = fakeFetch();
  // Actions are never answered, as on a connection that died without a word.
  const hanging = (url, init) => {
    if (!url.includes("/actions")) return fetcher(url, init);
    signals.push(init.signal);
    return new Promise(() => {});
  };
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: hanging, requestTimeout: 40, waitTimeout: 60 });
  try {
    const started = Date.now();
    await assert.rejects(session.perform("root", "incrementButtonTapped"), (error) => error instanceof RequestTimeoutError && error.timeout === 40);
    assert.ok(Date.now() - started < 2000);
    assert.ok(signals[0].aborted, "the request is aborted, not left open");
    await assert.rejects(session.perform("root", "factButtonTapped", undefined, { wait: true }), (error) => error.timeout === 100);
  } finally {
    session.close();
  }
  // An answer whose body stops coming counts too.
  const stalled = new ReadableStream({ start() {} });
  await assert.rejects(
    createSession("http://navd.test", "counter", undefined, { fetch: async () => new Response(stalled, { status: 201 }), requestTimeout: 40 }),
    RequestTimeoutError,
  );
});

test("closing a session ends its stream's ticket request at once, though the fetch does not heed its signal", async () => {
  const { fetcher } = fakeFetch();
  let asked = false;
  // The ticket request hangs and ignores its signal, as a custom fetch may.
  const deaf = (url, init) => {
    if (!url.endsWith("/stream-tickets")) return fetcher(url, init);
    asked = true;
    return new Promise(() => {});
  };
  const timers = () => process.getActiveResourcesInfo().filter((kind) => kind === "Timeout").length;
  const before = timers();
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: deaf, requestTimeout: 60000 });
  await until(() => asked);
  assert.ok(timers() > before, "the request is timed");
  session.close();
  await settle();
  // Its minute-long time limit went with it: nothing is left to keep a page or a process busy.
  assert.equal(timers(), before);
});

test("closing a session, or replacing its stream, hangs the stream up, though the fetch does not heed its signal", async () => {
  const counter = fixtures.find((f) => f.name === "counter.json");
  const { fetcher, streams } = fakeFetch();
  // A wrapper that drops the signal, as a logging or retrying fetch may.
  const deaf = (url, init) => fetcher(url, { ...init, signal: undefined });
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: deaf, idleTimeout: 60, retry: { initial: 1, max: 1 } });
  try {
    await until(() => streams.length === 1);
    streams[0].send(counter.events[0]);
    await until(() => session.connection === "open");
    // Fell silent: replaced, and the silent one hung up.
    await until(() => streams.length === 2);
    await until(() => streams[0].cancelled);
  } finally {
    session.close();
  }
  await until(() => streams.at(-1).cancelled);
});

test("a success that is not navd's JSON (a portal's page with 200) throws InvalidResponseError", async () => {
  const page = async () => new Response("<html>sign in to the Wi-Fi</html>", { status: 200, headers: { "Content-Type": "text/html" } });
  await assert.rejects(createSession("http://navd.test", "counter", undefined, { fetch: page }), InvalidResponseError);
  const { fetcher } = fakeFetch();
  const portal = (url, init) => (url.includes("/actions") ? page() : fetcher(url, init));
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: portal });
  try {
    await assert.rejects(session.perform("root", "incrementButtonTapped"), (error) => error instanceof InvalidResponseError && error.status === 200);
  } finally {
    session.close();
  }
});

test("createSession posts the feature and its deep link", async () => {
  const { fetcher, calls } = fakeFetch(() => [201, { id: "s1", token: TOKEN, version: 0, state: {}, navigation: {} }]);
  const created = await createSession("http://navd.test/", "app", { path: [{ settings: {} }] }, { fetch: fetcher });
  assert.equal(created.id, "s1");
  assert.equal(calls[0].url, "http://navd.test/sessions");
  assert.deepEqual(JSON.parse(calls[0].body), { feature: "app", state: { path: [{ settings: {} }] } });
});

test("an answer is read only up to maxResponseBytes; one longer by its length is not read at all", async () => {
  // A body that goes on (for 1 MiB, so that a client without the bound fails rather than
  // hangs), counting what was pulled from it and whether the client hung up.
  const endless = () => {
    const seen = { pulled: 0, cancelled: false };
    const body = new ReadableStream({
      pull(controller) {
        if (seen.pulled >= 1024 * 1024) return controller.close();
        seen.pulled += 1024;
        controller.enqueue(new Uint8Array(1024).fill(48));
      },
      cancel() {
        seen.cancelled = true;
      },
    });
    return { seen, body };
  };
  const first = endless();
  await assert.rejects(
    createSession("http://navd.test", "counter", undefined, { fetch: async () => new Response(first.body, { status: 201 }), maxResponseBytes: 64 * 1024 }),
    (error) => error instanceof ResponseTooLargeError && error.limit === 64 * 1024,
  );
  assert.ok(first.seen.cancelled, "the body is cancelled");
  assert.ok(first.seen.pulled <= 64 * 1024 + 1024 * 4, `pulled ${first.seen.pulled} bytes`);

  const second = endless();
  const headers = { "Content-Length": String(2 ** 40) };
  await assert.rejects(
    createSession("http://navd.test", "counter", undefined, { fetch: async () => new Response(second.body, { status: 201, headers }) }),
    ResponseTooLargeError,
  );
  assert.ok(second.seen.cancelled);

  // A session's own calls take the limit given to connect; exactly the limit is read.
  const answer = JSON.stringify({ version: 3, events: [] });
  for (const [limit, fits] of [[answer.length, true], [answer.length - 1, false]]) {
    const fetcher = async (url) => (url.includes("/actions") ? new Response(answer, { status: 200 }) : new Promise(() => {}));
    const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher, maxResponseBytes: limit });
    session.close();
    const outcome = await session.perform("root", "incrementButtonTapped").then(() => "read", (error) => error.name);
    assert.equal(outcome, fits ? "read" : "ResponseTooLargeError", `limit ${limit}`);
  }
});
