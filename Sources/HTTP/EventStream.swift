import Synchronization

/// A response that stays open and carries raw bytes (server-sent events) until it is
/// closed. Sending is thread-safe and never blocks: bytes queue here, shared rather than
/// copied, and the connection's loop writes them when the socket accepts more.
public final class EventStream: Sendable {
    private struct State {
        var queue = ByteQueue()
        /// A close asked for by the application (`.closedByServer`) or by a full buffer (`.tooSlow`).
        var requestedClose: EventStreamCloseReason?
        /// Set once the stream has ended; the reason reported to `onClose`.
        var endReason: EventStreamCloseReason?
        var onClose: (@Sendable (EventStreamCloseReason) -> Void)?
        /// The loop has been told about queued bytes and has not yet found the queue empty.
        var loopNotified = false
        /// Where the stream lives; released when it ends, so a stream the application keeps
        /// does not keep the loop (and through it the handler) alive.
        var owner: (loop: EventLoop, connection: Connection)?
    }

    private let state: Mutex<State>
    /// The most that may wait for the client behind the message being written: what a handler
    /// should not queue in one message when it has a smaller choice (a snapshot for a long replay).
    public let bufferLimit: Int
    /// The executor of the loop that writes this stream (nil for one that never opened): what
    /// fans a batch out to many streams can queue each loop's share on that loop.
    public let executor: LoopExecutor?

    init(loop: EventLoop, connection: Connection, bufferLimit: Int) {
        var state = State()
        state.owner = (loop, connection)
        self.state = Mutex(state)
        self.bufferLimit = bufferLimit
        self.executor = loop.executor
    }

    /// A stream that never opened.
    init(endedWith reason: EventStreamCloseReason) {
        var state = State()
        state.endReason = reason
        self.state = Mutex(state)
        self.bufferLimit = 0
        self.executor = nil
    }

    /// Queues bytes for the client; false if the stream is closed (or just closed because
    /// more than `streamBufferLimit` bytes would wait behind the message being written:
    /// reason `.tooSlow`).
    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        enum Action { case closed, queued, notify, overflow }
        let action = state.withLock { state -> Action in
            guard state.endReason == nil, state.requestedClose == nil else { return .closed }
            guard !bytes.isEmpty else { return .queued }
            // The limit bounds the backlog behind the message being written, not a message: a
            // large snapshot to an empty queue is queued whole, and events may follow it within
            // the limit while the client reads it. A client that stops reading is closed by the
            // loop (`streamStallTimeout`), or here once the backlog behind that message passes
            // the limit.
            guard state.queue.count == 0 || bytes.count <= bufferLimit - state.queue.countBehindFirst else {
                state.requestedClose = .tooSlow
                state.queue.removeAll()
                return .overflow
            }
            state.queue.append(bytes)
            if state.loopNotified { return .queued }
            state.loopNotified = true
            return .notify
        }
        switch action {
        case .closed:
            return false
        case .queued:
            return true
        case .notify:
            notifyLoop()
            return true
        case .overflow:
            notifyLoop()
            return false
        }
    }

    /// Flushes what is queued (within `streamCloseTimeout`), then closes the connection.
    public func close() {
        let requested = state.withLock { state -> Bool in
            guard state.endReason == nil, state.requestedClose == nil else { return false }
            state.requestedClose = .closedByServer
            return true
        }
        if requested { notifyLoop() }
    }

    /// Called exactly once, on any thread (usually the loop's), when the stream ends for any
    /// reason; at once if it already has. Setting it again replaces a handler not yet called.
    public func onClose(_ handler: @escaping @Sendable (EventStreamCloseReason) -> Void) {
        let ended = state.withLock { state -> EventStreamCloseReason? in
            if let reason = state.endReason { return reason }
            state.onClose = handler
            return nil
        }
        if let ended { handler(ended) }
    }

    public var isOpen: Bool {
        state.withLock { $0.endReason == nil && $0.requestedClose == nil }
    }

    /// Bytes queued and not yet written to the socket.
    public var queuedByteCount: Int {
        state.withLock { $0.queue.count }
    }

    private func notifyLoop() {
        guard let (loop, connection) = state.withLock({ $0.owner }) else { return }
        loop.post(.streamActivity(connection))
    }

    // MARK: Loop side

    /// Copies up to `limit` queued chunk references into `chunks`; returns the offset into
    /// the first and any requested close. An empty result re-arms notification.
    func takeChunks(into chunks: inout [[UInt8]], limit: Int) -> (offset: Int, requestedClose: EventStreamCloseReason?) {
        state.withLock { state in
            let offset = state.queue.peek(into: &chunks, limit: limit)
            if chunks.isEmpty { state.loopNotified = false }
            return (offset, state.requestedClose)
        }
    }

    func consume(_ sent: Int) {
        state.withLock { $0.queue.consume(sent) }
    }

    var requestedClose: EventStreamCloseReason? {
        state.withLock { $0.requestedClose }
    }

    /// Ends the stream and calls the close handler once. A close the application or a full
    /// buffer asked for keeps its reason over `reason`.
    func finish(_ reason: EventStreamCloseReason) {
        let callback = state.withLock { state -> (@Sendable (EventStreamCloseReason) -> Void, EventStreamCloseReason)? in
            guard state.endReason == nil else { return nil }
            let final = state.requestedClose ?? reason
            state.endReason = final
            state.queue.removeAll()
            state.owner = nil
            defer { state.onClose = nil }
            return state.onClose.map { ($0, final) }
        }
        if let (handler, final) = callback { handler(final) }
    }
}
