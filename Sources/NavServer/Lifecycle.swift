import Synchronization

/// Whether the server is ready for traffic: not while starting, not once shutting down.
final class Lifecycle: Sendable {
    private enum Phase: Int { case starting, ready, shuttingDown }
    private let phase = Atomic<Int>(Phase.starting.rawValue)

    var isReady: Bool { phase.load(ordering: .acquiring) == Phase.ready.rawValue }
    var isShuttingDown: Bool { phase.load(ordering: .acquiring) == Phase.shuttingDown.rawValue }

    func markReady() { phase.store(Phase.ready.rawValue, ordering: .releasing) }
    func markShuttingDown() { phase.store(Phase.shuttingDown.rawValue, ordering: .releasing) }
}
