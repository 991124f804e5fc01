import HTTP
import NavigationCore
import Synchronization

/// The open event streams of one session.
///
/// A batch is framed once and the same bytes are queued on every stream; a stream that cannot
/// keep up is closed by the HTTP layer (its buffer is bounded), never waited for.
final class SessionEvents: Sendable {
    /// Each stream with the last event id it already has: a stream that started from a snapshot
    /// covering events not yet durable (so not yet published) skips them when they come.
    /// An open stream, the last event it was sent, and its counts for the log.
    private typealias Subscriber = (stream: EventStream, through: Int, tally: StreamTally)
    private let streams = Mutex<[ObjectIdentifier: Subscriber]>([:])
    private let metrics: Metrics

    init(metrics: Metrics) {
        self.metrics = metrics
    }

    var count: Int { streams.withLock { $0.count } }

    /// Registers a stream with what it must see first. Called on the session's executor, so no
    /// batch can slip in between.
    /// `events` counts the events in `bytes`, for the stream's tally.
    func add(_ stream: EventStream, first bytes: [UInt8], events: Int, through sequence: Int, tally: StreamTally) {
        // First bytes first: a heartbeat must not get ahead of `retry:` and the snapshot.
        if stream.send(bytes) { tally.sent(events: events, bytes: bytes.count) }
        streams.withLock { $0[ObjectIdentifier(stream)] = (stream, sequence, tally) }
        // A stream that closed meanwhile already ran its removal; take it out again.
        if !stream.isOpen { remove(stream) }
    }

    func remove(_ stream: EventStream) {
        streams.withLock { $0[ObjectIdentifier(stream)] = nil }
    }

    /// Called on the session's executor with every batch, in order. The streams written by the
    /// session's own loop get the batch here; each other loop's share is queued on that loop in
    /// one piece, so the loops fan out in parallel (in order: a loop runs its queue in order).
    func publish(_ events: [NavigationEvent]) {
        for event in events { metrics.eventEmitted(event.kind.rawValue) }
        let ends = events.last?.kind == .end
        // After `end` nothing follows: the streams leave the session now and close once it is sent.
        let current = streams.withLock { streams in
            defer { if ends { streams.removeAll() } }
            return Array(streams.values)
        }
        guard !current.isEmpty, let first = events.first?.sequence else { return }
        let frames = ServerSentEvents.frames(events)
        let deliver = { @Sendable (_ share: [Subscriber]) in
            for (stream, through, tally) in share {
                if through < first {
                    if stream.send(frames) { tally.sent(events: events.count, bytes: frames.count, end: ends) }
                } else {
                    let unseen = events.filter { $0.sequence > through }
                    if !unseen.isEmpty {
                        let bytes = ServerSentEvents.frames(unseen)
                        if stream.send(bytes) { tally.sent(events: unseen.count, bytes: bytes.count, end: ends) }
                    }
                }
                if ends { stream.close() }
            }
        }
        var here: [Subscriber] = []
        var elsewhere: [ObjectIdentifier: (executor: LoopExecutor, share: [Subscriber])] = [:]
        for entry in current {
            guard let executor = entry.stream.executor, !executor.isCurrent else {
                here.append(entry)
                continue
            }
            elsewhere[ObjectIdentifier(executor), default: (executor, [])].share.append(entry)
        }
        // The other loops' shares first: they start on them while this loop writes its own.
        for (executor, share) in elsewhere.values { executor.execute { deliver(share) } }
        deliver(here)
    }

    func sendHeartbeat() {
        for (stream, _, tally) in streams.withLock({ Array($0.values) }) where stream.send(ServerSentEvents.heartbeat) {
            tally.sent(events: 0, bytes: ServerSentEvents.heartbeat.count)
        }
    }

    func closeAll() {
        let all = streams.withLock { streams in
            defer { streams.removeAll() }
            return streams.values.map(\.stream)
        }
        for stream in all { stream.close() }
    }
}
