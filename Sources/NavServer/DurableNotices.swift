import Dispatch
import Synchronization

/// Tells sessions their writes are durable, away from the store's writer.
///
/// The writer is the one serial step every durable request passes through; what it does after a
/// commit delays the next one. Waking a session (a task for its actor) costs more than
/// recording the outcome, so the writer only queues the wake-ups here, and they run together on
/// a queue of their own: one hand-over per commit, not one per request.
final class DurableNotices: Sendable {
    private let queue = DispatchQueue(label: "navd.store.notices", qos: .userInitiated)
    private let pending = Mutex<[@Sendable () -> Void]>([])

    /// Runs `notice` soon, after every notice queued before it.
    func post(_ notice: @escaping @Sendable () -> Void) {
        let first = pending.withLock { pending in
            pending.append(notice)
            return pending.count == 1
        }
        guard first else { return }
        queue.async { [self] in
            let notices = pending.withLock { pending in
                defer { pending.removeAll(keepingCapacity: true) }
                return pending
            }
            for notice in notices { notice() }
        }
    }
}
