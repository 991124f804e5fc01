// navd's JavaScript client: a live mirror of one session's navigation tree, and the session's
// mutating endpoints. An ES module with no dependencies and no build step; navd serves it as
// GET /client.js. Runs in browsers and in Node 20+.
//
//   import { connect, createSession } from "/client.js";
//   const { id, token } = await createSession(location.origin, "counter");
//   const session = connect(location.origin, { id, token });
//   session.subscribe(() => render(session.tree, session.connection));
//   await session.perform("root", "incrementButtonTapped");
//
// The token never appears in a URL: every stream (and every reconnection) opens with a one-time
// ticket from POST /sessions/{id}/stream-tickets, and resumes with ?lastEventId= so nothing is
// missed or applied twice. The stream is read with fetch rather than EventSource, which hides
// navd's heartbeat comments: a connection that goes silent is then noticed and replaced.

/** What navd's streams advise (`retry: 3000`): a client waits at least this before reconnecting. */
export const NAVD_RETRY_MS = 3000;

/** The shortest first wait a stream's `retry:` may set: `retry: 0` must not make a busy loop. */
export const MIN_ADVISED_RETRY_MS = 500;

/** navd sends a comment at least every 15 s; a stream silent for this long is taken as gone. */
export const NAVD_IDLE_TIMEOUT_MS = 45000;

/** The largest event taken by default, in characters: a whole snapshot must fit. */
export const MAX_EVENT_LENGTH = 64 * 1024 * 1024;

/**
 * The longest answer (other than a stream) read by default, in bytes: as long as the longest
 * event, since an answer carries at most a session whole or a batch of its events.
 */
export const MAX_RESPONSE_BYTES = 64 * 1024 * 1024;

/**
 * How long a request may take by default, in ms, answer read included: navd answers in
 * milliseconds, so a request still open after this is on a connection that died without a word
 * (a half-open TCP connection, a proxy that hangs). A `wait` has the wait's own bound on top.
 */
export const REQUEST_TIMEOUT_MS = 30000;

/** The longest a `wait` may last on navd (`?timeout=` is at most 60 s; its own bound is 10 s). */
const LONGEST_WAIT_MS = 60000;

/** The event types of API.md, in the order a client must handle them. */
export const EVENT_TYPES = ["snapshot", "present", "dismiss", "push", "pop", "state", "end"];

/**
 * A delay `setTimeout` keeps: it fires at once for anything over 2³¹−1 ms (about 24.8 days) or
 * not a number, so `idleTimeout: Infinity` would otherwise drop every stream after 1 ms.
 */
function timerDelay(ms) {
  return Number.isNaN(ms) ? 2 ** 31 - 1 : Math.min(Math.max(ms, 0), 2 ** 31 - 1);
}

/** An answer of navd that is not a success: `status`, and API.md's error `code` and `message`. */
export class NavdError extends Error {
  constructor(status, code, message) {
    super(`${status} ${code}: ${message}`);
    this.name = "NavdError";
    this.status = status;
    this.code = code;
  }
}

/**
 * An answer longer than the client reads: a server that is not navd (or a buggy one) cannot
 * fill the page's memory with one answer.
 */
export class ResponseTooLargeError extends Error {
  constructor(limit) {
    super(`an answer longer than ${limit} bytes`);
    this.name = "ResponseTooLargeError";
    this.limit = limit;
  }
}

/**
 * A success whose body is not navd's (a captive portal's or a proxy's page with status 200):
 * whether the request took effect is unknown.
 */
export class InvalidResponseError extends Error {
  constructor(status, text) {
    super(`a ${status} answer that is not a JSON object: ${text.slice(0, 200)}`);
    this.name = "InvalidResponseError";
    this.status = status;
  }
}

/** A request that had no whole answer within its time: it may or may not have taken effect. */
export class RequestTimeoutError extends Error {
  constructor(timeout) {
    super(`no answer within ${timeout} ms`);
    this.name = "RequestTimeoutError";
    this.timeout = timeout;
  }
}

/** An event that does not fit the tree (out of API.md's order, or naming what is not there). */
export class MirrorError extends Error {
  constructor(message) {
    super(message);
    this.name = "MirrorError";
  }
}

/**
 * The navigation tree as a client holds it, built from a `snapshot` and the events after it.
 * `tree` has exactly the shape GET /sessions/{id}/navigation returns (API.md, invariant 8).
 * Strict: an inconsistent event throws `MirrorError` and leaves the tree as it was.
 */
export class NavigationMirror {
  constructor() {
    this.tree = null;
    this.ended = null;
    this.features = new Map(); // id -> { node, owner }
    this.stacks = new Map(); // id -> { stack, owner }
  }

  /** Applies one event; `data` is its parsed JSON. */
  apply(type, data) {
    switch (type) {
      case "snapshot":
        return this.load(data.navigation);
      case "present": {
        const owner = this.features.get(data.parent);
        if (!owner) throw new MirrorError(`present ${data.id}: unknown parent ${data.parent}`);
        this.adopt(this.node(data, ["parent"]), owner.node, owner.node.presentations);
        return;
      }
      case "dismiss": {
        const entry = this.features.get(data.id);
        const list = entry?.owner?.presentations;
        const index = list ? list.indexOf(entry.node) : -1;
        if (index < 0) throw new MirrorError(`dismiss: ${data.id} is not presented`);
        this.requireEmpty(entry.node, "dismiss");
        list.splice(index, 1);
        this.forget(entry.node);
        return;
      }
      case "push": {
        const entry = this.stacks.get(data.stack);
        if (!entry) throw new MirrorError(`push ${data.id}: unknown stack ${data.stack}`);
        if (data.index !== entry.stack.elements.length) {
          throw new MirrorError(`push ${data.id}: index ${data.index} is not the top of ${data.stack}`);
        }
        this.adopt(this.node(data, ["stack", "index"]), entry.owner, entry.stack.elements);
        return;
      }
      case "pop": {
        const entry = this.stacks.get(data.stack);
        if (!entry || !Array.isArray(data.ids)) throw new MirrorError(`pop: unknown stack ${data.stack}`);
        const elements = entry.stack.elements;
        const top = elements.slice(elements.length - data.ids.length).reverse().map((node) => node.id);
        if (data.ids.length > elements.length || top.join() !== data.ids.join()) {
          throw new MirrorError(`pop: ${data.ids} are not the top of ${data.stack} (${top})`);
        }
        const removed = elements.slice(elements.length - data.ids.length);
        removed.forEach((node) => this.requireEmpty(node, "pop"));
        elements.splice(elements.length - data.ids.length);
        removed.forEach((node) => this.forget(node));
        return;
      }
      case "state": {
        const entry = this.features.get(data.feature);
        if (!entry || typeof data.changes !== "object") throw new MirrorError(`state: unknown feature ${data.feature}`);
        Object.assign(entry.node.state, data.changes);
        return;
      }
      case "end":
        this.ended = data.reason;
        return;
      default:
        throw new MirrorError(`unknown event ${type}`);
    }
  }

  /** Replaces the tree by `navigation` (a snapshot's, or GET …/navigation). */
  load(navigation) {
    if (!navigation || typeof navigation !== "object") throw new MirrorError("snapshot without navigation");
    const features = new Map();
    const stacks = new Map();
    const walk = (node, owner) => {
      if (typeof node.id !== "string" || features.has(node.id)) throw new MirrorError(`bad or repeated id ${node.id}`);
      features.set(node.id, { node, owner });
      for (const child of node.presentations ?? []) walk(child, node);
      for (const stack of node.stacks ?? []) {
        if (typeof stack.id !== "string" || stacks.has(stack.id)) throw new MirrorError(`bad or repeated stack id ${stack.id}`);
        stacks.set(stack.id, { stack, owner: node });
        for (const element of stack.elements ?? []) walk(element, node);
      }
    };
    const tree = structuredClone(navigation);
    walk(tree, null);
    this.tree = tree;
    this.features = features;
    this.stacks = stacks;
  }

  /** A node as GET …/navigation shows it, from a `present` or `push` event. */
  node(data, dropped) {
    if (typeof data.id !== "string" || this.features.has(data.id)) throw new MirrorError(`${data.id} is already on screen`);
    const node = { id: data.id };
    for (const [key, value] of Object.entries(data)) {
      if (!["id", "state", "stacks", ...dropped].includes(key)) node[key] = structuredClone(value);
    }
    node.state = structuredClone(data.state ?? {});
    node.presentations = [];
    node.stacks = (data.stacks ?? []).map((stack) => ({ id: stack.id, slot: stack.slot, elements: [] }));
    // `push` and `pop` name a stack by its id alone: one already on screen is not taken again.
    const ids = node.stacks.map((stack) => stack.id);
    if (ids.some((id, index) => typeof id !== "string" || ids.indexOf(id) !== index || this.stacks.has(id))) {
      throw new MirrorError(`${data.id} brings a stack id already on screen`);
    }
    return node;
  }

  adopt(node, owner, list) {
    list.push(node);
    this.features.set(node.id, { node, owner });
    for (const stack of node.stacks) this.stacks.set(stack.id, { stack, owner: node });
  }

  requireEmpty(node, what) {
    if (node.presentations.length || node.stacks.some((stack) => stack.elements.length)) {
      throw new MirrorError(`${what} of ${node.id} before its own presentations and stacks`);
    }
  }

  forget(node) {
    this.features.delete(node.id);
    for (const stack of node.stacks) this.stacks.delete(stack.id);
  }

  /** The node with that feature instance id, or null. */
  find(id) {
    return this.features.get(id)?.node ?? null;
  }
}

/** An event of an event stream that is longer than the parser takes. */
export class EventTooLargeError extends Error {
  constructor(limit) {
    super(`an event longer than ${limit} characters`);
    this.name = "EventTooLargeError";
  }
}

/**
 * Splits decoded event-stream text into events, as the HTML standard's parser does: lines end
 * with CRLF, LF or CR (a chunk may end between CR and LF), a line starting with ":" is a comment,
 * `retry:` takes digits only, and an event without data is not dispatched. An event longer than
 * `maxEventLength` throws `EventTooLargeError` rather than growing without bound.
 */
export class EventStreamParser {
  constructor({ maxEventLength = MAX_EVENT_LENGTH } = {}) {
    this.maxEventLength = maxEventLength;
    this.partial = "";
    this.skipLineFeed = false;
    // Before the stream's first character, where a byte order mark is skipped.
    this.atStart = true;
    this.type = "";
    // The data lines so far, joined by newlines as they come: one string, so an event of many
    // short lines costs what its characters do; null until the first.
    this.data = null;
    this.lastEventId = "";
    // The id the event being read gave itself, if any (`lastEventId` carries over between events).
    this.id = null;
    /** The last `retry:` advice in ms, or null. */
    this.retry = null;
  }

  /**
   * Takes the next piece of text; returns the events it completes, `{type, data, lastEventId, id}`:
   * `id` is the event's own `id:` field, or null when it had none.
   */
  push(text) {
    const events = [];
    if (text === "") return events;
    let start = 0;
    // A byte order mark opening the stream is not part of its first line (a decoder given the
    // bytes may have dropped it already; this parser may be given text from anywhere).
    if (this.atStart && text.startsWith("\uFEFF")) start = 1;
    this.atStart = false;
    if (this.skipLineFeed && text.startsWith("\n")) start = 1;
    this.skipLineFeed = false;
    // The next LF and CR at or after `start`, each searched again only once passed, so a large
    // piece of text is scanned once rather than once per line.
    const next = (character) => {
      const at = text.indexOf(character, start);
      return at < 0 ? Infinity : at;
    };
    let lf = -1;
    let cr = -1;
    while (start < text.length) {
      if (lf < start) lf = next("\n");
      if (cr < start) cr = next("\r");
      const end = Math.min(lf, cr) === Infinity ? -1 : Math.min(lf, cr);
      if (end < 0) {
        this.partial += text.slice(start);
        this.check();
        break;
      }
      const line = this.partial + text.slice(start, end);
      this.partial = "";
      if (text[end] === "\r") {
        if (end + 1 === text.length) this.skipLineFeed = true;
        start = text[end + 1] === "\n" ? end + 2 : end + 1;
      } else {
        start = end + 1;
      }
      const event = this.line(line);
      if (event) events.push(event);
    }
    return events;
  }

  line(line) {
    if (line === "") return this.dispatch();
    if (line.startsWith(":")) return null;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") {
      this.data = this.data === null ? value : `${this.data}\n${value}`;
      this.check();
    } else if (field === "event") {
      this.type = value;
    } else if (field === "id") {
      if (!value.includes("\0")) {
        this.lastEventId = value;
        this.id = value;
      }
    } else if (field === "retry") {
      if (/^[0-9]+$/.test(value)) this.retry = Number(value);
    }
    return null;
  }

  dispatch() {
    const event = this.data === null ? null
      : { type: this.type || "message", data: this.data, lastEventId: this.lastEventId, id: this.id };
    this.type = "";
    this.id = null;
    this.data = null;
    return event;
  }

  check() {
    if ((this.data?.length ?? 0) + this.partial.length > this.maxEventLength) throw new EventTooLargeError(this.maxEventLength);
  }
}

/** Creates a session, optionally deep-linked: `{id, token, version, state, navigation}`. */
export async function createSession(baseURL, feature, state, { fetch: fetcher = globalThis.fetch, maxResponseBytes, requestTimeout } = {}) {
  const body = state === undefined ? { feature } : { feature, state };
  return request(fetcher, "POST", url(baseURL, "/sessions"), { body, maxResponseBytes, timeout: requestTimeout });
}

/** GET /features: every hostable feature, its actions, bindings and navigation slots. */
export async function features(baseURL, { fetch: fetcher = globalThis.fetch, maxResponseBytes, requestTimeout } = {}) {
  return request(fetcher, "GET", url(baseURL, "/features"), { maxResponseBytes, timeout: requestTimeout });
}

/**
 * Follows session `id` live. The returned `Session` holds `tree` (null until the first snapshot),
 * `connection` ("connecting", "open", "reconnecting" or "ended"), `endReason`, `lastEventId` and
 * `version`, and calls every subscriber (and `onChange`) after each change.
 *
 * options: `onChange(change, session)`; `retry` `{initial, max}` in ms (back-off doubles from
 * `initial`, with jitter, up to `max`; by default `initial` is the stream's `retry:` advice, 3 s
 * until one arrives); `idleTimeout` in ms (45 s: navd's heartbeat comes every 15 s, so a longer
 * silence means the connection is dead); `maxEventLength`, the longest event taken (64 Mi
 * characters; a longer one ends the session's mirror with `endReason` "eventTooLarge");
 * `maxResponseBytes`, the longest answer of a request read (64 MiB; a longer one throws
 * `ResponseTooLargeError`); `waitTimeout` in ms, the longest a mutation with `wait` waits for
 * the work it started (navd's `?timeout=`: over 0 and at most 60 s; by default the server's
 * bound, 10 s); `requestTimeout` in ms, the longest a request may take before it throws
 * `RequestTimeoutError` (30 s; a `wait` gets its wait's bound on top, 60 s when `waitTimeout` is
 * not set); `fetch` to use instead of the global.
 */
export function connect(baseURL, { id, token, onChange, retry = {}, idleTimeout, maxEventLength, maxResponseBytes, waitTimeout, requestTimeout, fetch: fetcher } = {}) {
  return new Session(baseURL, id, token, { onChange, retry, idleTimeout, maxEventLength, maxResponseBytes, waitTimeout, requestTimeout, fetcher });
}

export class Session {
  constructor(baseURL, id, token, { onChange, retry, idleTimeout, maxEventLength, maxResponseBytes, waitTimeout, requestTimeout, fetcher }) {
    if (typeof id !== "string" || typeof token !== "string") throw new TypeError("connect needs {id, token}");
    this.baseURL = baseURL;
    this.id = id;
    this.mirror = new NavigationMirror();
    this.connection = "connecting";
    this.endReason = null;
    this.lastEventId = null;
    this.version = null;
    this.attempt = 0;
    // Fresh snapshots in a row that the next event did not fit.
    this.outOfStep = 0;
    this.listeners = new Set(onChange ? [onChange] : []);
    this.retry = { initial: retry.initial ?? NAVD_RETRY_MS, max: retry.max ?? 30000 };
    // The server's `retry:` advice sets the first wait, unless the caller chose one.
    this.retryAdvised = retry.initial === undefined;
    this.idleTimeout = idleTimeout ?? NAVD_IDLE_TIMEOUT_MS;
    this.maxEventLength = maxEventLength ?? MAX_EVENT_LENGTH;
    this.maxResponseBytes = maxResponseBytes ?? MAX_RESPONSE_BYTES;
    // How long a `wait` waits at most, in ms (navd's `?timeout=`); null: the server's bound.
    this.waitTimeout = waitTimeout ?? null;
    this.requestTimeout = requestTimeout ?? REQUEST_TIMEOUT_MS;
    this.fetcher = fetcher ?? globalThis.fetch.bind(globalThis);
    // The stream being read: its AbortController, which `stop()` aborts.
    this.stream = null;
    this.timer = null;
    this.watchdog = null;
    // The token stays in this closure: never a property, never a URL.
    this.authorization = () => `Bearer ${token}`;
    this.open();
  }

  get tree() {
    return this.mirror.tree;
  }

  /** Calls `listener(change, session)` after every change; returns a function that stops it. */
  subscribe(listener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Stops following the session (the session itself goes on; `end()` ends it). */
  close() {
    this.stop();
    this.setConnection("ended", "closed");
  }

  // MARK: - Mutating endpoints. Options: `ifMatch` (a version: 412 if the session moved on), `wait`.

  perform(target, action, args, options = {}) {
    const body = { target, action };
    if (args !== undefined) body.args = args;
    return this.mutate("POST", "/actions", body, options);
  }

  bind(feature, name, value, options = {}) {
    return this.mutate("PUT", `/features/${seg(feature)}/bindings/${seg(name)}`, value, options);
  }

  dismiss(presentation, { button, ...options } = {}) {
    return this.mutate("POST", `/presentations/${seg(presentation)}/dismiss`, button === undefined ? undefined : { button }, options);
  }

  /** `how`: `{count: n}` or `{to: elementId}`; nothing pops one. */
  pop(stack, how = {}, options = {}) {
    return this.mutate("POST", `/stacks/${seg(stack)}/pop`, how, options);
  }

  push(feature, value, options = {}) {
    return this.mutate("POST", `/features/${seg(feature)}/push`, { value }, options);
  }

  replaceState(state, options = {}) {
    return this.mutate("PUT", "/state", { state }, options);
  }

  /** DELETE: ends the session for everyone; streams get `end`. */
  async end(options = {}) {
    await this.request("DELETE", this.path(""), { headers: this.headers(options) });
  }

  /** GET /sessions/{id}: `{id, feature, version, state, navigation}`. */
  async describe() {
    const answer = await this.request("GET", this.path(""), { headers: this.headers({}) });
    this.noteVersion(answer.version);
    return answer;
  }

  async mutate(method, path, body, { ifMatch, wait } = {}) {
    const timeout = wait && this.waitTimeout !== null ? `&timeout=${this.waitTimeout / 1000}` : "";
    const target = this.path(path) + (wait ? `?wait=true${timeout}` : "");
    const bound = this.requestTimeout + (wait ? this.waitTimeout ?? LONGEST_WAIT_MS : 0);
    const answer = await this.request(method, target, { body, headers: this.headers({ ifMatch }), timeout: bound });
    this.noteVersion(answer.version);
    this.takeOwn(answer.events);
    return answer;
  }

  /**
   * A mutation's own events, applied at once when they follow on from the last event the tree
   * has, so that what the caller reads after `await` shows its change; the stream brings them
   * again, and they are skipped by id. From the first that does not follow on (an event of
   * another client's, or of an effect, is still on its way) or does not fit, they are left to the
   * stream, which brings everything in order (and starts over from a snapshot if it must).
   */
  takeOwn(events) {
    if (!Array.isArray(events)) return;
    for (const event of events) {
      if (this.lastEventId === null || this.connection === "ended") return;
      const id = event?.id;
      if (!Number.isInteger(id) || id <= this.lastEventId) continue;
      const type = event.event;
      if (id !== this.lastEventId + 1 || type === "snapshot" || !EVENT_TYPES.includes(type)) return;
      // A copy: the answer is the caller's, and the tree must not change with it.
      const data = structuredClone(event.data);
      try {
        this.mirror.apply(type, data);
      } catch {
        // Not applied, and nothing changed: the stream brings it, and starts over if it must.
        return;
      }
      this.applied(type, id, data, { fromStream: false });
    }
  }

  request(method, target, options) {
    return request(this.fetcher, method, target, { timeout: this.requestTimeout, ...options, maxResponseBytes: this.maxResponseBytes });
  }

  headers({ ifMatch }) {
    const headers = { Authorization: this.authorization() };
    if (ifMatch !== undefined && ifMatch !== null) headers["If-Match"] = `"${ifMatch}"`;
    return headers;
  }

  path(rest) {
    return url(this.baseURL, `/sessions/${seg(this.id)}${rest}`);
  }

  /** The version this client last learned (a snapshot, or an answer to one of its requests). */
  noteVersion(version) {
    if (Number.isInteger(version) && (this.version === null || version > this.version)) this.version = version;
  }

  // MARK: - The stream

  async open() {
    if (this.connection === "ended") return;
    const stream = new AbortController();
    this.stream = stream;
    let response;
    try {
      this.arm(stream);
      const { ticket } = await this.request("POST", this.path("/stream-tickets"), { headers: this.headers({}), signal: stream.signal });
      if (this.stream !== stream) return;
      let target = `${this.path("/events")}?ticket=${encodeURIComponent(ticket)}`;
      if (this.lastEventId !== null) target += `&lastEventId=${this.lastEventId}`;
      response = await this.fetcher(target, { headers: { Accept: "text/event-stream" }, cache: "no-store", signal: stream.signal });
    } catch (error) {
      if (this.stream !== stream) return;
      // 401: the token is wrong; 404: the session ended while we were away. Neither heals.
      if (error instanceof NavdError && (error.status === 401 || error.status === 404)) {
        return this.finish(error.status === 404 ? "gone" : "unauthorized");
      }
      return this.broken();
    }
    // A body not read is cancelled, not left to the signal: a `fetch` option may not heed it.
    const drop = () => response.body?.cancel().catch(() => {});
    if (this.stream !== stream) return drop();
    if (response.status === 404) {
      drop();
      return this.finish("gone");
    }
    // Any other refusal (a ticket spent or expired meanwhile: 401) heals with a new ticket.
    // A 204 or 205 has no body to read, whatever its Content-Type says.
    if (!response.ok || !response.body || !/^text\/event-stream/i.test(response.headers.get("Content-Type") ?? "")) {
      drop();
      return this.broken();
    }
    this.setConnection("open");
    // A listener may have closed the session on hearing it.
    if (this.stream !== stream) return drop();
    await this.read(stream, response.body);
  }

  /** Reads the stream's events until it ends, breaks, falls silent, or the session stops it. */
  async read(stream, body) {
    const parser = new EventStreamParser({ maxEventLength: this.maxEventLength });
    const decoder = new TextDecoder();
    try {
      const reader = body.getReader();
      // Stopping the stream hangs it up here too: a `fetch` option may not heed the signal.
      const hangUp = () => reader.cancel().catch(() => {});
      if (stream.signal.aborted) hangUp();
      else stream.signal.addEventListener("abort", hangUp, { once: true });
      for (;;) {
        this.arm(stream);
        const { value, done } = await reader.read();
        if (this.stream !== stream) return;
        if (done) break;
        // The stream answered: the next break starts the back-off over.
        this.attempt = 0;
        const events = parser.push(decoder.decode(value, { stream: true }));
        if (this.retryAdvised && parser.retry !== null) this.retry.initial = Math.min(Math.max(parser.retry, MIN_ADVISED_RETRY_MS), this.retry.max);
        for (const event of events) {
          // A type this client does not know is skipped, as EventSource skips unlistened types.
          if (EVENT_TYPES.includes(event.type)) this.receive(event.type, event);
          if (this.stream !== stream) return;
        }
      }
    } catch (error) {
      if (this.stream !== stream) return;
      // The mirror cannot skip an event: one it will not take ends it, as the Swift client's does.
      if (error instanceof EventTooLargeError) return this.finish("eventTooLarge");
    }
    // Closed without `end` (navd shutting down, a proxy's timeout) or broken: resume elsewhere.
    if (this.stream === stream) this.broken();
  }

  /** Restarts the silence timer of `stream`: bytes, heartbeats included, must come within `idleTimeout`. */
  arm(stream) {
    clearTimeout(this.watchdog);
    this.watchdog = setTimeout(() => {
      if (this.stream === stream) this.broken();
    }, timerDelay(this.idleTimeout));
  }

  /** The stream broke, never opened, or went silent: close it and reconnect after the back-off. */
  broken() {
    this.stop();
    this.later();
  }

  receive(type, message) {
    // Only an event's own id says where it stands; navd gives every event one.
    const id = message.id ? Number(message.id) : NaN;
    // A resumed stream has nothing twice, but a mutation's answer may have brought an event
    // first (`takeOwn`): nothing is applied twice.
    if (type !== "snapshot" && this.lastEventId !== null && Number.isInteger(id) && id <= this.lastEventId) return;
    let data;
    try {
      data = JSON.parse(message.data);
    } catch (error) {
      return this.outOfStepWith(error);
    }
    this.take(type, id, data);
  }

  /** Applies one event from the stream; one that does not fit starts over from a snapshot. */
  take(type, id, data) {
    try {
      this.mirror.apply(type, data);
    } catch (error) {
      return this.outOfStepWith(error);
    }
    this.applied(type, id, data, { fromStream: true });
  }

  /** What follows an event applied to the tree, from the stream or from a mutation's answer. */
  applied(type, id, data, { fromStream }) {
    if (Number.isInteger(id)) this.lastEventId = id;
    if (type === "snapshot") this.noteVersion(data.version);
    // The tree moved on past a snapshot: back in step.
    else this.outOfStep = 0;
    if (fromStream) this.setConnection("open");
    this.notify({ kind: "event", event: { id, type, data } });
    if (type === "end") this.finish(data.reason);
  }

  /**
   * An event that does not fit the tree: start over from a fresh snapshot, after a wait that
   * grows while it keeps happening (a snapshot, then an event that does not fit it), though
   * each stream answers.
   */
  outOfStepWith(error) {
    this.lastEventId = null;
    this.outOfStep += 1;
    this.stop();
    this.notify({ kind: "error", error });
    this.later();
  }

  /** Reconnects after a back-off: doubling from `retry.initial` up to `retry.max`, with jitter. */
  later() {
    if (this.connection === "ended") return;
    // At least 1 ms to double, so even `initial: 0` backs off.
    const failures = Math.max(this.attempt, this.outOfStep);
    const delay = Math.min(this.retry.max, Math.max(this.retry.initial, 1) * 2 ** Math.min(failures, 32)) * (0.75 + Math.random() * 0.5);
    this.attempt += 1;
    this.setConnection("reconnecting");
    // A listener may have closed the session on hearing it.
    if (this.connection === "ended") return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => this.open(), timerDelay(delay));
  }

  finish(reason) {
    this.stop();
    this.setConnection("ended", reason);
  }

  stop() {
    clearTimeout(this.timer);
    clearTimeout(this.watchdog);
    this.timer = null;
    this.watchdog = null;
    if (this.stream) {
      this.stream.abort();
      this.stream = null;
    }
  }

  setConnection(state, reason) {
    if (this.connection === "ended") return;
    if (state === "ended") this.endReason = reason ?? null;
    if (this.connection === state) return;
    this.connection = state;
    this.notify({ kind: "connection", connection: state });
  }

  notify(change) {
    for (const listener of [...this.listeners]) {
      try {
        listener(change, this);
      } catch (error) {
        console.error(error);
      }
    }
  }
}

/**
 * The answer's body as text, read only up to `limit` bytes: `response.text()` keeps whatever a
 * server sends. One that says in advance it is longer is refused unread.
 */
async function boundedText(response, limit) {
  const length = Number(response.headers?.get("Content-Length") ?? NaN);
  if (length > limit) {
    response.body?.cancel().catch(() => {});
    throw new ResponseTooLargeError(limit);
  }
  if (!response.body) {
    // No stream to read from (a null-body status, a polyfill): bounded after the fact.
    const text = await response.text();
    if (text.length > limit || new TextEncoder().encode(text).byteLength > limit) throw new ResponseTooLargeError(limit);
    return text;
  }
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let received = 0;
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return text + decoder.decode();
    received += value.byteLength;
    if (received > limit) {
      reader.cancel().catch(() => {});
      throw new ResponseTooLargeError(limit);
    }
    text += decoder.decode(value, { stream: true });
  }
}

function seg(value) {
  return encodeURIComponent(String(value));
}

function url(baseURL, path) {
  return String(baseURL).replace(/\/+$/, "") + path;
}

async function request(fetcher, method, target, { body, headers = {}, signal, maxResponseBytes = MAX_RESPONSE_BYTES, timeout } = {}) {
  // Aborted by the caller's signal, or when the answer has not come whole in time.
  const limit = timeout ?? REQUEST_TIMEOUT_MS;
  const abort = new AbortController();
  const init = { method, headers: { ...headers }, cache: "no-store", signal: abort.signal };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let timer, cut;
  // Raced as well as aborted: a `fetch` given in the options may not heed its signal, and
  // neither the time limit nor the caller's abort may wait for it to.
  const expired = new Promise((_, reject) => {
    cut = reject;
    timer = setTimeout(() => {
      const error = new RequestTimeoutError(limit);
      abort.abort(error);
      reject(error);
    }, timerDelay(limit));
  });
  const forward = () => {
    abort.abort(signal.reason);
    cut(signal.reason);
  };
  if (signal?.aborted) forward();
  else signal?.addEventListener("abort", forward, { once: true });
  const answer = (async () => {
    const response = await fetcher(target, init);
    return [response, await boundedText(response, maxResponseBytes ?? MAX_RESPONSE_BYTES)];
  })();
  // What the fetch does once the time is up is nobody's concern.
  answer.catch(() => {});
  let response, text;
  try {
    [response, text] = await Promise.race([answer, expired]);
  } finally {
    clearTimeout(timer);
    signal?.removeEventListener("abort", forward);
  }
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!response.ok) {
    throw new NavdError(response.status, json?.error?.code ?? "http_error", json?.error?.message ?? (text || response.statusText));
  }
  // navd answers a success with a JSON object, or with nothing (204).
  if (text && (json === null || typeof json !== "object" || Array.isArray(json))) throw new InvalidResponseError(response.status, text);
  return json;
}
