import HTTP
import Synchronization

/// What one event stream has been sent, for its `stream_closed` log line: events, bytes, and
/// whether one of them was `end`.
final class StreamTally: Sendable {
    private let eventCount = Atomic<Int>(0)
    private let byteCount = Atomic<Int>(0)
    private let sentEnd = Atomic<Bool>(false)

    var events: Int { eventCount.load(ordering: .relaxed) }
    var bytes: Int { byteCount.load(ordering: .relaxed) }

    /// Counts bytes the stream accepted, `events` of them events (0 for a heartbeat).
    func sent(events: Int, bytes: Int, end: Bool = false) {
        eventCount.add(events, ordering: .relaxed)
        byteCount.add(bytes, ordering: .relaxed)
        if end { sentEnd.store(true, ordering: .relaxed) }
    }

    /// The reason logged: a close the server asked for says why it did.
    func reason(_ closed: EventStreamCloseReason, shuttingDown: Bool) -> String {
        switch closed {
        case .clientClosed: "client_closed"
        case .tooSlow: "too_slow"
        case .shutdown: "shutdown"
        case .closedByServer:
            if shuttingDown { "shutdown" }
            // After `end`: the session was deleted or expired.
            else if sentEnd.load(ordering: .relaxed) { "session_ended" }
            // A failed write rolled the session back: the client resumes from what is durable.
            else { "server_closed" }
        }
    }
}
