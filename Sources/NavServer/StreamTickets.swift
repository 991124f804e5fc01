import Synchronization

/// One-time tickets that each open one event stream of a session.
///
/// A browser's `EventSource` cannot send `Authorization`, and a token in `?token=` ends up in
/// consoles, proxy logs and history. A ticket in the URL is harmless once used or a minute old.
/// Tickets live only in memory: after a restart a client simply asks for a new one.
///
/// Bounded: at most `limit` are outstanding per session (a new one evicts the oldest, so the
/// newest request always works), and expired ones are purged whenever the session issues or
/// redeems one; they go with the session when it ends.
final class StreamTickets: Sendable {
    static let lifetime: Duration = .seconds(60)
    static let limit = 16

    private struct Ticket {
        let value: [UInt8]
        let expires: ContinuousClock.Instant
    }

    private let outstanding = Mutex<[Ticket]>([])
    private let lifetime: Duration
    private let limit: Int
    private let now: @Sendable () -> ContinuousClock.Instant

    init(lifetime: Duration = StreamTickets.lifetime, limit: Int = StreamTickets.limit,
         now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }) {
        self.lifetime = lifetime
        self.limit = limit
        self.now = now
    }

    /// Tickets not yet used or expired.
    var count: Int {
        let now = now()
        return outstanding.withLock { tickets in
            tickets.removeAll { $0.expires <= now }
            return tickets.count
        }
    }

    /// A new ticket: 256 random bits, hex.
    func issue() -> String {
        let ticket = Identifiers.token()
        let now = now()
        outstanding.withLock { tickets in
            tickets.removeAll { $0.expires <= now }
            if tickets.count >= limit { tickets.removeFirst(tickets.count - limit + 1) }
            tickets.append(Ticket(value: Array(ticket.utf8), expires: now + lifetime))
        }
        return ticket
    }

    /// Whether `candidate` is an outstanding ticket; with `consume`, it is used up. Every
    /// outstanding ticket is compared in constant time, so timing says nothing about them.
    func redeem(_ candidate: String, consume: Bool = true) -> Bool {
        let bytes = Array(candidate.utf8)
        let now = now()
        return outstanding.withLock { tickets in
            tickets.removeAll { $0.expires <= now }
            var found: Int?
            for (index, ticket) in tickets.enumerated() where Self.equal(ticket.value, bytes) {
                found = index
            }
            guard let found else { return false }
            if consume { tickets.remove(at: found) }
            return true
        }
    }

    private static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        guard a.count == b.count else { return false }
        var difference: UInt8 = 0
        for (x, y) in zip(a, b) { difference |= x ^ y }
        return difference == 0
    }
}
