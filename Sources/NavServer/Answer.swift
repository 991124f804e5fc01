import HTTP

/// Answers one request exactly once, from any thread, and accounts for it: the request log,
/// the metrics, and the headers every response carries (`X-Request-ID`, CORS).
struct Answer: Sendable {
    /// The client's valid `X-Request-ID`, or one made for this request.
    let requestID: String
    private let method: String
    private let path: String
    private let query: [(name: String, value: String)]
    /// The page's origin (`Origin`), which decides the CORS headers.
    private let origin: String?
    private let responder: HTTPResponder
    private let route: Route?
    private let started: ContinuousClock.Instant
    private let handler: APIHandler
    /// A `?wait=true` request: its latency is mostly the effect it waits for, so it is measured
    /// apart from ordinary requests.
    private var waits = false

    /// Query parameters that carry a credential (the token for curl, a stream ticket for
    /// `EventSource`): never kept, so no log line can show them, in any spelling of their name.
    static let credentials: Set<String> = ["token", "ticket"]

    init(request: HTTPRequest, responder: HTTPResponder, route: Route?, started: ContinuousClock.Instant, handler: APIHandler) {
        // Two ids would be ambiguous: a fresh one is used instead.
        let ids = request.headers.values(RequestID.header)
        self.requestID = RequestID.of(ids.count == 1 ? ids[0] : nil)
        self.method = request.method
        self.path = request.path
        self.query = request.query.filter { !Self.credentials.contains($0.name.lowercased()) }
        self.origin = request.headers["Origin"]
        self.responder = responder
        self.route = route
        self.started = started
        self.handler = handler
    }

    /// This answer, for a request that waits for its effects.
    func waiting() -> Answer {
        var answer = self
        answer.waits = true
        return answer
    }

    /// The client's address, e.g. `127.0.0.1:5555`.
    var remoteAddress: String { responder.remoteAddress }

    func send(_ response: HTTPResponse) {
        var response = response
        for (name, value) in handler.configuration.cors.responseHeaders(origin: origin) { response.headers.set(name, value) }
        response.headers.set(RequestID.header, requestID)
        account(response.status, bytes: method == "HEAD" ? 0 : response.body.count)
        responder.respond(response)
    }

    func fail(_ error: APIError) {
        send(error.response)
    }

    func startStream(headers: HTTPHeaders) -> EventStream {
        var headers = headers
        headers.set(RequestID.header, requestID)
        account(200, bytes: 0)
        return responder.startEventStream(headers: headers)
    }

    private func account(_ status: Int, bytes: Int) {
        let seconds = (ContinuousClock.now - started).inSeconds
        handler.metrics.requestFinished(route: route, method: method, status: status, seconds: seconds, waited: waits)
        guard handler.log.logsRequests else { return }
        handler.log.record(.init(id: requestID, remote: remoteAddress, method: method, path: path, query: query,
                                 status: status, bytes: bytes, seconds: seconds))
    }
}

extension Duration {
    /// In seconds, for logs and metrics.
    var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
