import Synchronization

/// Answers one request, from any thread. The first answer wins; later ones are ignored, as
/// are answers for connections that are gone.
public final class HTTPResponder: Sendable {
    private let loop: EventLoop
    private let connection: Connection
    private let sequence: UInt64
    /// The request's head (body left out), for the answer to a request the handler dropped;
    /// let go once the request is answered, so a long-lived stream does not keep it.
    private let head: Mutex<HTTPRequest?>
    private let answered = Atomic<Bool>(false)
    /// Lets the loop stop parsing pipelined requests when the handler opens a stream at once.
    let openedStream = Atomic<Bool>(false)
    /// The request's body as counted toward `maxBufferedBodies`: given back once it is answered.
    private let countedBodyBytes: Int

    init(loop: EventLoop, connection: Connection, sequence: UInt64, request: HTTPRequest, countedBodyBytes: Int = 0) {
        self.loop = loop
        self.connection = connection
        self.sequence = sequence
        self.countedBodyBytes = countedBodyBytes
        var head = request
        head.body = []
        self.head = Mutex(head)
    }

    public func respond(_ response: HTTPResponse) {
        guard claimForAnswer() else { return }
        loop.post(.respond(connection, sequence: sequence, response))
    }

    /// Answers 200 with these headers (the caller sets `Content-Type: text/event-stream`),
    /// then keeps the connection open as a stream of raw bytes until either side closes it.
    /// Requests pipelined after this one are not served: not parsed at all when the stream is
    /// started during `handle`, left unanswered if they were already handed to the handler. If the request was already
    /// answered, the returned stream is closed.
    public func startEventStream(headers: HTTPHeaders) -> EventStream {
        guard claimForAnswer() else { return EventStream(endedWith: .closedByServer) }
        openedStream.store(true, ordering: .relaxed)
        let stream = EventStream(loop: loop, connection: connection, bufferLimit: loop.settings.streamBufferLimit)
        loop.post(.startStream(connection, sequence: sequence, stream, headers))
        return stream
    }

    /// A request the handler dropped without answering would pin its connection (and every
    /// request pipelined behind it) for good: answer it with a 500 instead, written by the
    /// handler as a refusal.
    deinit {
        guard claim() else { return }
        let response = loop.shared.response(
            refusing: .internalError("The server did not answer this request."), request: head.withLock { $0 }, peer: connection.peer)
        loop.post(.respond(connection, sequence: sequence, response))
    }

    /// The loop this request arrived on: work placed there answers without a thread switch.
    public var executor: LoopExecutor { loop.executor }

    /// The client's address, for logs.
    public var peer: PeerAddress { connection.peer }

    private func claim() -> Bool {
        guard answered.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else { return false }
        if countedBodyBytes > 0 { loop.shared.bufferedBodies.subtract(countedBodyBytes, ordering: .relaxed) }
        return true
    }

    /// Claims the answer for the handler's own response: the head is not needed any more.
    private func claimForAnswer() -> Bool {
        guard claim() else { return false }
        head.withLock { $0 = nil }
        return true
    }
}
