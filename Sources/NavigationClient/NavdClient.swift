import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a mutating endpoint answers: the session's version and the events the request caused.
public struct MutationResult: Sendable, Hashable {
    /// The session's version after the request.
    public var version: Int
    /// The events the request caused, in order, with their event ids.
    public var events: [(id: Int, event: NavigationEvent)] { _events.map { ($0.id, $0.event) } }
    let _events: [Envelope]
    /// With `wait`: the events are not all the request's effects caused (the wait ran out, or
    /// navd's event buffer no longer held them); the rest come on the event stream.
    public var effectsPending = false

    struct Envelope: Sendable, Hashable { var id: Int; var event: NavigationEvent }
}

/// A session navd has just created: its token is shown only this once.
public struct CreatedSession: Sendable, Hashable {
    /// The session's id, which every later call names.
    public var id: String
    /// The bearer token; navd keeps only its hash and never shows it again.
    public var token: String
    /// The version the session starts at.
    public var version: Int
    /// The tree derived from the initial state.
    public var navigation: NavigationNode
}

/// A session as `GET /sessions/{id}` shows it now.
public struct SessionDescription: Sendable, Hashable {
    /// The session's id.
    public var id: String
    /// The feature at its root, e.g. `counter`.
    public var feature: String
    /// The version, which `ifMatch` names.
    public var version: Int
    /// The root feature's state, as navd encodes it.
    public var state: JSONValue
    /// The tree derived from that state.
    public var navigation: NavigationNode
}

/// navd's HTTP API at `baseURL`. `createSession` needs no credentials; `session(id:token:)`
/// gives the calls of one session.
public struct NavdClient: Sendable {
    /// Where navd listens, e.g. `http://127.0.0.1:8080`.
    public let baseURL: URL
    let transport: BoundedTransport
    /// The longest a request may take, answer read included, a `wait` aside.
    public let requestTimeout: TimeInterval

    /// The longest answer read by default: as long as the longest event a mirror takes, since
    /// an answer carries at most a session whole or a batch of its events.
    public static let defaultMaxResponseBytes = 64 << 20

    /// The longest a request takes by default: navd answers in milliseconds, so one still open
    /// after this is on a connection that died without a word, or a server that is not navd.
    public static let defaultRequestTimeout: TimeInterval = 30

    /// - Parameters:
    ///   - configuration: the transport's settings (timeouts, proxies, headers); the client makes
    ///     a URLSession of its own with them.
    ///   - maxResponseBytes: the longest answer read; a longer one throws `invalidResponse`
    ///     without being read on, so a server that is not navd cannot fill the app's memory.
    ///   - requestTimeout: seconds a request may take, answer read included, before it throws
    ///     `transport`; a `wait` gets the wait's own bound on top. The configuration's
    ///     `timeoutIntervalForRequest` bounds a silence, which a byte now and then resets.
    public init(baseURL: URL, configuration: URLSessionConfiguration = .ephemeral,
                maxResponseBytes: Int = NavdClient.defaultMaxResponseBytes,
                requestTimeout: TimeInterval = NavdClient.defaultRequestTimeout) {
        self.baseURL = baseURL
        self.requestTimeout = requestTimeout
        transport = BoundedTransport(configuration: configuration, maxResponseBytes: maxResponseBytes)
    }

    /// `POST /sessions`, deep-linked by a full or partial `state` when given.
    public func createSession(feature: String, state: JSONValue? = nil) async throws(NavdError) -> CreatedSession {
        var body: [String: JSONValue] = ["feature": .string(feature)]
        if let state { body["state"] = state }
        let answer = try await send("POST", path: "/sessions", body: .object(body), token: nil, ifMatch: nil)
        guard let id = answer["id"]?.stringValue, let token = answer["token"]?.stringValue, let version = answer["version"]?.intValue,
              let navigation = answer["navigation"] else { throw .invalidResponse("POST /sessions without id, token, version, navigation") }
        return CreatedSession(id: id, token: token, version: version, navigation: try Self.decode(NavigationNode.self, navigation))
    }

    /// The calls of session `id`, authorized by `token`.
    public func session(id: String, token: String) -> SessionClient { SessionClient(client: self, id: id, token: token) }

    /// `waits`: how long navd may hold the answer back on purpose (a `wait`), added to the
    /// configuration's bound on silence, which would otherwise cut a wait off as a dead connection.
    func send(_ method: String, path: String, query: [URLQueryItem] = [], body: JSONValue?, token: String?, ifMatch: Int?,
              waits: TimeInterval = 0) async throws(NavdError) -> JSONValue {
        guard var components = URLComponents(url: baseURL.appending(path: path), resolvingAgainstBaseURL: false) else {
            throw .transport("bad URL for \(path)")
        }
        if !query.isEmpty { components.queryItems = query }
        guard let url = components.url else { throw .transport("bad URL for \(path)") }
        var request = URLRequest(url: url)
        request.httpMethod = method
        request.cachePolicy = .reloadIgnoringLocalCacheData
        if waits > 0 { request.timeoutInterval = transport.idleTimeout + waits }
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let ifMatch { request.setValue("\"\(ifMatch)\"", forHTTPHeaderField: "If-Match") }
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            do { request.httpBody = try JSONEncoder().encode(body) } catch { throw .invalidResponse("unencodable body: \(error)") }
        }
        let (data, http) = try await transport.data(for: request, within: requestTimeout + waits)
        let json = data.isEmpty ? JSONValue.null : ((try? JSONDecoder().decode(JSONValue.self, from: data)) ?? .null)
        guard (200..<300).contains(http.statusCode) else {
            throw .server(status: http.statusCode, body: json, message: String(decoding: data.prefix(512), as: UTF8.self))
        }
        return json
    }

    static func decode<T: Decodable>(_ type: T.Type, _ value: JSONValue) throws(NavdError) -> T {
        do { return try JSONDecoder().decode(type, from: JSONEncoder().encode(value)) } catch {
            throw .invalidResponse("\(T.self): \(error)")
        }
    }
}

/// The calls of one session. Every mutating call takes an optional `ifMatch` version: if the
/// session moved on, navd answers 412 `version_mismatch` and changes nothing.
public struct SessionClient: Sendable {
    /// The client the calls go through.
    public let client: NavdClient
    /// The session's id.
    public let id: String
    let token: String
    /// How long a request with `wait` waits at most for the work it started (navd's `?timeout=`:
    /// over 0 and at most 60 s; navd refuses anything else with `bad_query`); nil for the
    /// server's own bound (10 s by default).
    public var waitTimeout: Duration?

    /// How a pop says what to remove.
    public enum Pop: Sendable, Hashable {
        /// Removes this many elements from the end.
        case count(Int)
        /// Keeps this element on top.
        case to(String)
    }

    /// `POST …/actions`: runs `action` on the feature instance `target` with `args`; with `wait`,
    /// the answer also holds the events of the effects it started (every event since the
    /// request began; `effectsPending` when some are not in it).
    public func perform(_ action: String, target: String = "root", args: [String: JSONValue]? = nil,
                        ifMatch: Int? = nil, wait: Bool = false) async throws(NavdError) -> MutationResult {
        var body: [String: JSONValue] = ["target": .string(target), "action": .string(action)]
        if let args { body["args"] = .object(args) }
        return try await mutate("POST", "/actions", body: .object(body), ifMatch: ifMatch, wait: wait)
    }

    /// `PUT …/features/{feature}/bindings/{name}`: sets a bindable field as the user typed it.
    /// `wait` as for `perform`, for whatever work the model's code starts on the change.
    public func bind(_ feature: String, _ name: String, to value: JSONValue, ifMatch: Int? = nil,
                     wait: Bool = false) async throws(NavdError) -> MutationResult {
        try await mutate("PUT", "/features/\(feature)/bindings/\(name)", body: value, ifMatch: ifMatch, wait: wait)
    }

    /// The user dismissed `presentation`; with `button`, that alert button's action goes first
    /// (with `wait`, the answer also holds the events of the work that action started).
    public func dismiss(_ presentation: String, button: String? = nil, ifMatch: Int? = nil,
                        wait: Bool = false) async throws(NavdError) -> MutationResult {
        try await mutate("POST", "/presentations/\(presentation)/dismiss",
                         body: button.map { .object(["button": .string($0)]) }, ifMatch: ifMatch, wait: wait)
    }

    /// `POST …/stacks/{stack}/pop`: the user went back. `wait` as for `perform`.
    public func pop(_ stack: String, _ how: Pop = .count(1), ifMatch: Int? = nil,
                    wait: Bool = false) async throws(NavdError) -> MutationResult {
        let body: JSONValue = switch how {
        case .count(let count): .object(["count": .number(Double(count))])
        case .to(let element): .object(["to": .string(element)])
        }
        return try await mutate("POST", "/stacks/\(stack)/pop", body: body, ifMatch: ifMatch, wait: wait)
    }

    /// `POST …/features/{feature}/push`: pushes a path value onto the nearest stack enclosing
    /// `feature` that accepts it. `wait` as for `perform`.
    public func push(_ value: JSONValue, from feature: String = "root", ifMatch: Int? = nil,
                     wait: Bool = false) async throws(NavdError) -> MutationResult {
        try await mutate("POST", "/features/\(feature)/push", body: .object(["value": value]), ifMatch: ifMatch, wait: wait)
    }

    /// `PUT …/state`: a deep link into the running session. `wait` as for `perform`.
    public func replaceState(_ state: JSONValue, ifMatch: Int? = nil, wait: Bool = false) async throws(NavdError) -> MutationResult {
        try await mutate("PUT", "/state", body: .object(["state": state]), ifMatch: ifMatch, wait: wait)
    }

    /// `DELETE`: ends the session for everyone; streams get `end`.
    public func end(ifMatch: Int? = nil) async throws(NavdError) {
        _ = try await client.send("DELETE", path: path(""), body: nil, token: token, ifMatch: ifMatch)
    }

    /// `GET /sessions/{id}`: the session whole, as navd holds it now.
    public func describe() async throws(NavdError) -> SessionDescription {
        let answer = try await client.send("GET", path: path(""), body: nil, token: token, ifMatch: nil)
        guard let id = answer["id"]?.stringValue, let feature = answer["feature"]?.stringValue,
              let version = answer["version"]?.intValue, let state = answer["state"], let navigation = answer["navigation"] else {
            throw .invalidResponse("GET /sessions/{id} without id, feature, version, state, navigation")
        }
        return SessionDescription(id: id, feature: feature, version: version, state: state,
                                  navigation: try NavdClient.decode(NavigationNode.self, navigation))
    }

    /// `GET …/navigation`: the tree as navd holds it now.
    public func navigation() async throws(NavdError) -> NavigationNode {
        try NavdClient.decode(NavigationNode.self, try await client.send("GET", path: path("/navigation"), body: nil, token: token, ifMatch: nil))
    }

    /// `POST …/stream-tickets`: a one-time ticket that opens one event stream.
    public func streamTicket() async throws(NavdError) -> String {
        let answer = try await client.send("POST", path: path("/stream-tickets"), body: nil, token: token, ifMatch: nil)
        guard let ticket = answer["ticket"]?.stringValue else { throw .invalidResponse("stream ticket without ticket") }
        return ticket
    }

    func path(_ rest: String) -> String { "/sessions/\(id)\(rest)" }

    /// The longest a `wait` may last on navd: its own bound is 10 s, and no `?timeout=` may pass 60 s.
    private static let longestWait: TimeInterval = 60

    private func mutate(_ method: String, _ rest: String, body: JSONValue?, ifMatch: Int?, wait: Bool = false) async throws(NavdError) -> MutationResult {
        var query: [URLQueryItem] = []
        var waits: TimeInterval = 0
        if wait {
            query.append(URLQueryItem(name: "wait", value: "true"))
            waits = Self.longestWait
            if let waitTimeout {
                let (seconds, attoseconds) = waitTimeout.components
                waits = Double(seconds) + Double(attoseconds) / 1e18
                query.append(URLQueryItem(name: "timeout", value: String(waits)))
            }
        }
        let answer = try await client.send(method, path: path(rest), query: query, body: body, token: token, ifMatch: ifMatch, waits: waits)
        guard let version = answer["version"]?.intValue, case .array(let events)? = answer["events"] else {
            throw .invalidResponse("\(method) \(rest) without version and events")
        }
        // The change is made: an event this client cannot read (a newer navd's) does not make
        // the call fail, which a caller could retry and so make twice. The events from there on
        // are left to the stream, which brings them in order; none is skipped in between.
        var envelopes: [MutationResult.Envelope] = []
        for envelope in events {
            guard let id = envelope["id"]?.intValue, let type = envelope["event"]?.stringValue, let data = envelope["data"],
                  let bytes = try? JSONEncoder().encode(data) else { break }
            let event: NavigationEvent?
            do { event = try NavigationEvent(type: type, data: bytes) } catch { break }
            // A type this client does not know is skipped, as on the stream.
            if let event { envelopes.append(.init(id: id, event: event)) }
        }
        return MutationResult(version: version, _events: envelopes, effectsPending: answer["effectsPending"]?.boolValue ?? false)
    }
}
