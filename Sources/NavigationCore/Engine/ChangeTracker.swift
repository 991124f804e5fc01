import Synchronization

/// Collects which feature instances changed since the last reconciliation.
///
/// Observation calls it from `willSet`, wherever the change happens; it only records and, for a
/// change made outside a transaction (an effect resuming, a timer), asks once for a flush, so
/// that every change in one turn of the session's executor lands in one batch.
final class ChangeTracker: Sendable {
    private struct State {
        var dirty: [Int] = []
        var flushRequested = false
        var inTransaction = false
    }

    private let state = Mutex(State())
    private let requestFlush: Mutex<(@Sendable () -> Void)?> = Mutex(nil)

    func onFlushNeeded(_ body: @escaping @Sendable () -> Void) {
        requestFlush.withLock { $0 = body }
    }

    func markDirty(_ serial: Int) {
        // Recorded before the flush is requested: the request encodes the state before the
        // change (`keepStateBeforeEffect`), and what `peek` lists is what that encoding must
        // not take from what is kept (`EncodedStates`).
        let shouldRequest = state.withLock { state in
            state.dirty.append(serial)
            guard !state.inTransaction, !state.flushRequested else { return false }
            state.flushRequested = true
            return true
        }
        if shouldRequest { requestFlush.withLock { $0 }?() }
    }

    /// While a transaction runs, it reconciles itself; no separate flush is needed.
    func setInTransaction(_ value: Bool) {
        state.withLock { $0.inTransaction = value }
    }

    /// What changed so far, left in place for the next `drain`.
    func peek() -> [Int] {
        state.withLock { $0.dirty }
    }

    func drain() -> [Int] {
        state.withLock { state in
            state.flushRequested = false
            // Handed over whole: emptying a buffer the caller still shares would copy it.
            var drained: [Int] = []
            swap(&drained, &state.dirty)
            return drained
        }
    }
}
