import HTTP

/// One request and its answer, as navd accounts for them: the headers every response carries
/// (`X-Request-ID`, CORS), the metrics and the request log. Answered requests and the ones the
/// HTTP layer refuses on its own go through it alike.
///
/// A class: an answer travels through several closures (the change, its failure, the durable
/// notice), and passing one reference costs less than copying every field each time.
final class Exchange: Sendable {
    /// The client's valid `X-Request-ID`, or one made for this request.
    let requestID: String
    /// The client's address, formatted only for a log line.
    private let peer: PeerAddress
    /// The client's address for a log line, e.g. `127.0.0.1:5555`.
    var remoteAddress: String { peer.description }
    /// Nil for a refusal whose head was never read.
    private let method: String?
    private let path: String?
    private let query: [(name: String, value: String)]
    /// Parameters left out of `query`.
    private let ignoredParameters: Int
    /// The page's origin (`Origin`), which decides the CORS headers.
    private let origin: String?
    private let route: Route?
    private let started: ContinuousClock.Instant
    private let handler: APIHandler
    /// A `?wait=true` request: its latency is mostly the effect it waits for, so it is measured
    /// apart from ordinary requests.
    private let waits: Bool

    /// The query parameters a log line shows: those navd reads, but for the credentials (the
    /// token for curl, a stream ticket for `EventSource`). Anything else is left out, so that no
    /// spelling of a credential that navd does not read (`token%00=`, `x=1;token=`) shows.
    static let logged: Set<String> = Set(APIHandler.queryParameters).subtracting(["token", "ticket"])

    /// - Parameter request: its head; nil when the HTTP layer refused it before reading one.
    init(request: HTTPRequest?, peer: PeerAddress, route: Route?, started: ContinuousClock.Instant, handler: APIHandler) {
        // Two ids would be ambiguous: a fresh one is used instead.
        let ids = request?.headers.values(RequestID.header) ?? []
        self.requestID = RequestID.of(ids.count == 1 ? ids[0] : nil)
        self.peer = peer
        self.method = request?.method
        self.path = request.map { String($0.encodedPath) }
        self.query = request?.query.filter { Self.logged.contains($0.name) } ?? []
        self.ignoredParameters = (request?.query.count ?? 0) - query.count
        self.origin = request.flatMap(CORSPolicy.origin(of:))
        self.route = route
        self.started = started
        self.handler = handler
        self.waits = false
    }

    private init(waiting exchange: Exchange) {
        requestID = exchange.requestID
        peer = exchange.peer
        method = exchange.method
        path = exchange.path
        query = exchange.query
        ignoredParameters = exchange.ignoredParameters
        origin = exchange.origin
        route = exchange.route
        started = exchange.started
        handler = exchange.handler
        waits = true
    }

    /// This exchange, for a request that waits for its effects.
    func waiting() -> Exchange {
        Exchange(waiting: self)
    }

    /// The response with the headers every answer carries, accounted for. A refusal is counted
    /// but not timed: it took no work, and its near-zero latency would only blur everyone else's.
    ///
    /// No answer is kept by a cache unless it says so (the static files do): a session's state can
    /// hold what its user typed. None is sniffed for another type than it says: an error that
    /// repeats the path a client sent is JSON, never a page.
    ///
    /// - Parameter logging: fields the request's log line adds (`APIError.logged`).
    func finish(_ response: HTTPResponse, timed: Bool = true, logging: [(name: String, value: String)] = []) -> HTTPResponse {
        var response = response
        if !response.headers.contains("Cache-Control") { response.headers.add("Cache-Control", "no-store") }
        if !response.headers.contains("X-Content-Type-Options") { response.headers.add("X-Content-Type-Options", "nosniff") }
        for (name, value) in handler.configuration.cors.responseHeaders(origin: origin) { response.headers.set(name, value) }
        response.headers.set(RequestID.header, requestID)
        account(response.status, bytes: method == "HEAD" ? 0 : response.body.count, timed: timed, logging: logging)
        return response
    }

    /// An event stream's headers: the request id (the caller adds CORS), accounted as a 200.
    func streamHeaders(_ headers: HTTPHeaders) -> HTTPHeaders {
        var headers = headers
        headers.set("X-Content-Type-Options", "nosniff")
        headers.set(RequestID.header, requestID)
        account(200, bytes: 0, timed: true)
        return headers
    }

    private func account(_ status: Int, bytes: Int, timed: Bool, logging: [(name: String, value: String)] = []) {
        let seconds = (ContinuousClock.now - started).inSeconds
        if timed {
            handler.metrics.requestFinished(route: route, method: method, status: status, seconds: seconds, waited: waits)
        } else {
            handler.metrics.requestRefused(route: route, method: method, status: status)
        }
        guard handler.log.logsRequests else { return }
        handler.log.record(.init(id: requestID, remote: remoteAddress, method: method, path: path, query: query, ignoredParameters: ignoredParameters,
                                 details: logging, status: status, bytes: bytes, seconds: seconds))
    }
}
