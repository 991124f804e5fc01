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
const { NavigationMirror, MirrorError, NavdError, NAVD_RETRY_MS, connect, createSession } = client;

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

/** A stand-in for the browser's EventSource that the test feeds by hand. */
class FakeEventSource {
  static opened = [];
  constructor(url) {
    this.url = url;
    this.listeners = {};
    this.closed = false;
    FakeEventSource.opened.push(this);
  }
  addEventListener(type, listener) {
    (this.listeners[type] ??= []).push(listener);
  }
  close() {
    this.closed = true;
  }
  open() {
    this.onopen?.({});
  }
  send(event) {
    for (const listener of this.listeners[event.event] ?? []) listener({ data: JSON.stringify(event.data), lastEventId: String(event.id) });
  }
  fail() {
    this.onerror?.({});
  }
}

/** A fetch that answers stream-ticket requests (or `answer(url, init)` for the rest) and records every call. */
function fakeFetch(answer = () => [200, { version: 1, events: [] }]) {
  const calls = [];
  let tickets = 0;
  const fetcher = async (url, init) => {
    calls.push({ url, ...init, headers: { ...init.headers } });
    const [status, body] = url.endsWith("/stream-tickets") ? [201, { ticket: `ticket${++tickets}`, expiresIn: 60 }] : answer(url, init);
    const text = body === undefined ? "" : JSON.stringify(body);
    return { ok: status >= 200 && status < 300, status, statusText: "", text: async () => text };
  };
  return { fetcher, calls };
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
      FakeEventSource.opened = [];
      const { fetcher, calls } = fakeFetch();
      const connections = [];
      const session = connect("http://navd.test/", {
        id: "s1", token: TOKEN, fetch: fetcher, EventSource: FakeEventSource, retry: { initial: 1, max: 4 },
        onChange: (change) => change.kind === "connection" && connections.push(change.connection),
      });
      assert.equal(session.connection, "connecting");
      await until(() => FakeEventSource.opened.length === 1);
      const first = FakeEventSource.opened[0];
      assert.equal(first.url, "http://navd.test/sessions/s1/events?ticket=ticket1");
      first.open();
      events.slice(0, split).forEach((event) => first.send(event));
      first.fail();
      assert.ok(first.closed, "a broken stream is closed, never left to reconnect with a spent ticket");
      assert.equal(session.connection, "reconnecting");
      await until(() => FakeEventSource.opened.length === 2);
      const second = FakeEventSource.opened[1];
      assert.equal(second.url, `http://navd.test/sessions/s1/events?ticket=ticket2&lastEventId=${events[split - 1].id}`);
      second.open();
      // The server sends nothing twice; were it to, the client would not apply it twice.
      second.send(events[split - 1]);
      events.slice(split).forEach((event) => second.send(event));
      assert.deepStrictEqual(session.tree, fixture.checkpoints.at(-1).navigation, `${fixture.name} split at ${split}`);
      assert.equal(session.connection, "ended");
      assert.equal(session.endReason, "deleted");
      assert.ok(second.closed);
      assert.deepEqual(connections, ["open", "reconnecting", "open", "ended"]);
      for (const call of calls) {
        assert.ok(!call.url.includes(TOKEN), "the token is never in a URL");
        assert.equal(call.headers.Authorization, `Bearer ${TOKEN}`);
      }
      for (const stream of FakeEventSource.opened) assert.ok(!stream.url.includes(TOKEN));
      assert.ok(!JSON.stringify(session).includes(TOKEN), "the token is not kept as a property");
      await settle();
      assert.equal(FakeEventSource.opened.length, 2, "nothing reconnects after end");
    }
  });
}

test("an event out of step starts over from a fresh snapshot", async () => {
  FakeEventSource.opened = [];
  const counter = fixtures.find((f) => f.name === "counter.json");
  const errors = [];
  const session = connect("http://navd.test", {
    id: "s1", token: TOKEN, fetch: fakeFetch().fetcher, EventSource: FakeEventSource, retry: { initial: 1, max: 1 },
    onChange: (change) => change.kind === "error" && errors.push(change.error),
  });
  await until(() => FakeEventSource.opened.length === 1);
  FakeEventSource.opened[0].send(counter.events[0]);
  FakeEventSource.opened[0].send({ id: 1, event: "dismiss", data: { id: "p404", origin: "server" } });
  assert.equal(errors.length, 1);
  assert.ok(errors[0] instanceof MirrorError);
  await until(() => FakeEventSource.opened.length === 2);
  assert.equal(FakeEventSource.opened[1].url, "http://navd.test/sessions/s1/events?ticket=ticket2", "no lastEventId: a snapshot");
  session.close();
  assert.equal(session.connection, "ended");
});

test("by default a broken stream waits navd's retry: advice before it reconnects", async () => {
  FakeEventSource.opened = [];
  const counter = fixtures.find((f) => f.name === "counter.json");
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fakeFetch().fetcher, EventSource: FakeEventSource });
  await until(() => FakeEventSource.opened.length === 1);
  FakeEventSource.opened[0].open();
  FakeEventSource.opened[0].send(counter.events[0]);
  FakeEventSource.opened[0].fail();
  assert.equal(session.connection, "reconnecting");
  assert.ok(session.timer !== null);
  // With jitter the first wait is 3 s × 0.75 at least; a second later nothing has reopened.
  await new Promise((resolve) => setTimeout(resolve, 1000));
  assert.equal(FakeEventSource.opened.length, 1, "reconnected before navd's retry: 3000");
  assert.equal(NAVD_RETRY_MS, 3000);
  session.close();
});

test("a session that is gone ends the connection; a server that is down is retried", async () => {
  FakeEventSource.opened = [];
  let down = 2;
  const calls = [];
  const fetcher = async (url, init) => {
    calls.push(url);
    if (down-- > 0) throw new TypeError("connection refused");
    return { ok: false, status: 404, statusText: "", text: async () => JSON.stringify({ error: { code: "session_not_found", message: "no session s1" } }) };
  };
  const session = connect("http://navd.test", { id: "s1", token: TOKEN, fetch: fetcher, EventSource: FakeEventSource, retry: { initial: 1, max: 2 } });
  await until(() => session.connection === "ended");
  assert.equal(session.endReason, "gone");
  assert.equal(calls.length, 3);
  assert.equal(FakeEventSource.opened.length, 0);
});

test("every mutating endpoint, with If-Match and errors", async () => {
  FakeEventSource.opened = [];
  let version = 4;
  const { fetcher, calls } = fakeFetch((url, init) => {
    if (init.headers["If-Match"] === '"1"') return [412, { error: { code: "precondition_failed", message: "version is 5" } }];
    if (init.method === "DELETE") return [204, undefined];
    return [200, { version: ++version, events: [] }];
  });
  const session = connect("http://navd.test", { id: "s 1", token: TOKEN, fetch: fetcher, EventSource: FakeEventSource });
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
  const made = calls.filter((call) => !call.url.endsWith("/stream-tickets"))
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
  for (const call of calls) assert.equal(call.headers.Authorization, `Bearer ${TOKEN}`);
  session.close();
});

test("createSession posts the feature and its deep link", async () => {
  const { fetcher, calls } = fakeFetch(() => [201, { id: "s1", token: TOKEN, version: 0, state: {}, navigation: {} }]);
  const created = await createSession("http://navd.test/", "app", { path: [{ settings: {} }] }, { fetch: fetcher });
  assert.equal(created.id, "s1");
  assert.equal(calls[0].url, "http://navd.test/sessions");
  assert.deepEqual(JSON.parse(calls[0].body), { feature: "app", state: { path: [{ settings: {} }] } });
});
