import HTTP

/// Answers one request exactly once, from any thread, and accounts for it: the request log,
/// the metrics and the CORS headers every response carries.
struct Answer: Sendable {
    private let method: String
    private let path: String
    private let query: [(name: String, value: String)]
    /// The page's origin (`Origin`), which decides the CORS headers.
    private let origin: String?
    private let responder: HTTPResponder
    private let route: Route?
    private let started: ContinuousClock.Instant
    private let handler: APIHandler

    init(request: HTTPRequest, responder: HTTPResponder, route: Route?, started: ContinuousClock.Instant, handler: APIHandler) {
        self.method = request.method
        self.path = request.path
        self.query = request.query
        self.origin = request.headers["Origin"]
        self.responder = responder
        self.route = route
        self.started = started
        self.handler = handler
    }

    func send(_ response: HTTPResponse) {
        var response = response
        for (name, value) in handler.configuration.cors.responseHeaders(origin: origin) { response.headers.set(name, value) }
        account(response.status)
        responder.respond(response)
    }

    func fail(_ error: APIError) {
        send(error.response)
    }

    func startStream(headers: HTTPHeaders) -> EventStream {
        account(200)
        return responder.startEventStream(headers: headers)
    }

    private func account(_ status: Int) {
        let elapsed = ContinuousClock.now - started
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        handler.metrics.requestFinished(route: route, status: status, seconds: seconds)
        handler.log.record(method: method, path: path, query: query, status: status, seconds: seconds)
    }
}
