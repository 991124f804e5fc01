import HTTP

/// Answers one request exactly once, from any thread, through its exchange (the headers every
/// response carries, the metrics, the log).
struct Answer: Sendable {
    private let exchange: Exchange
    private let responder: HTTPResponder

    init(request: HTTPRequest, responder: HTTPResponder, route: Route?, started: ContinuousClock.Instant, handler: APIHandler) {
        self.exchange = Exchange(request: request, peer: responder.peer, route: route,
                                 started: started, handler: handler)
        self.responder = responder
    }

    var requestID: String { exchange.requestID }
    /// The event loop the request arrived on: where a task for it runs, off the cooperative pool.
    var executor: LoopExecutor { responder.executor }
    var remoteAddress: String { exchange.remoteAddress }

    /// This answer, for a request that waits for its effects.
    func waiting() -> Answer {
        Answer(exchange: exchange.waiting(), responder: responder)
    }

    private init(exchange: Exchange, responder: HTTPResponder) {
        self.exchange = exchange
        self.responder = responder
    }

    /// - Parameter logging: fields the request's log line adds (`APIError.logged`).
    func send(_ response: HTTPResponse, logging: [(name: String, value: String)] = []) {
        responder.respond(exchange.finish(response, logging: logging))
    }

    func fail(_ error: APIError) {
        send(error.response, logging: error.logged)
    }

    func startStream(headers: HTTPHeaders) -> EventStream {
        responder.startEventStream(headers: exchange.streamHeaders(headers))
    }
}

extension Duration {
    /// In seconds, for logs and metrics.
    var inSeconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
