import Synchronization

/// Whether the server is ready for traffic: not while starting, not once leaving rotation or
/// shutting down.
final class Lifecycle: Sendable {
    private enum Phase: Int {
        case starting, ready
        /// SIGTERM with a grace period: still serving everything, but `/readyz` says 503 so
        /// load balancers stop sending new work before the drain begins.
        case leaving
        case shuttingDown
    }
    private let phase = Atomic<Int>(Phase.starting.rawValue)

    var isReady: Bool { phase.load(ordering: .acquiring) == Phase.ready.rawValue }
    var isLeaving: Bool { phase.load(ordering: .acquiring) >= Phase.leaving.rawValue }
    var isShuttingDown: Bool { phase.load(ordering: .acquiring) == Phase.shuttingDown.rawValue }

    func markReady() { phase.store(Phase.ready.rawValue, ordering: .releasing) }
    /// Only from ready: a server still starting stays not ready anyway.
    func markLeaving() {
        _ = phase.compareExchange(expected: Phase.ready.rawValue, desired: Phase.leaving.rawValue, ordering: .acquiringAndReleasing)
    }
    func markShuttingDown() { phase.store(Phase.shuttingDown.rawValue, ordering: .releasing) }
}
