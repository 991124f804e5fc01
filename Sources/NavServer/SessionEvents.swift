import HTTP
import NavigationCore
import Synchronization

/// The open event streams of one session.
///
/// A batch is framed once and the same bytes are queued on every stream; a stream that cannot
/// keep up is closed by the HTTP layer (its buffer is bounded), never waited for.
final class SessionEvents: Sendable {
    private let streams = Mutex<[ObjectIdentifier: EventStream]>([:])
    private let metrics: Metrics

    init(metrics: Metrics) {
        self.metrics = metrics
    }

    var count: Int { streams.withLock { $0.count } }

    /// Registers a stream with what it must see first. Called on the session's executor, so no
    /// batch can slip in between.
    func add(_ stream: EventStream, first bytes: [UInt8]) {
        // First bytes first: a heartbeat must not get ahead of `retry:` and the snapshot.
        stream.send(bytes)
        streams.withLock { $0[ObjectIdentifier(stream)] = stream }
        // A stream that closed meanwhile already ran its removal; take it out again.
        if !stream.isOpen { remove(stream) }
    }

    func remove(_ stream: EventStream) {
        streams.withLock { $0[ObjectIdentifier(stream)] = nil }
    }

    /// Called on the session's executor with every batch, in order.
    func publish(_ events: [NavigationEvent]) {
        for event in events { metrics.eventEmitted(event.kind.rawValue) }
        let current = streams.withLock { Array($0.values) }
        guard !current.isEmpty else { return }
        let frames = ServerSentEvents.frames(events)
        for stream in current { stream.send(frames) }
        if events.last?.kind == .end { closeAll() }
    }

    func sendHeartbeat() {
        for stream in streams.withLock({ Array($0.values) }) { stream.send(ServerSentEvents.heartbeat) }
    }

    func closeAll() {
        let all = streams.withLock { streams in
            defer { streams.removeAll() }
            return Array(streams.values)
        }
        for stream in all { stream.close() }
    }
}
