import Synchronization

/// What all the sessions sharing it may hold together: the bound `SessionLimits` cannot give,
/// since each of those holds one session, and a server with many sessions each within every
/// bound can still hold more than the machine has.
///
/// Each session is charged what grows with its clients' input: the bytes of its state (as
/// compact JSON), the encoded bytes of the events it keeps for resuming, `perFeature` for each
/// feature it shows past the root, and a fixed `perSession` for the rest. The
/// charge follows every batch and rollback and is given back when the session goes away.
///
/// Once the budget is spent, sessions stop growing: a host makes no new session, a session's kept
/// events make room for new ones by dropping old ones (a resume from before them gets a
/// snapshot), and a change that would grow a session's state by more than `smallGrowth` is
/// refused (an effect's, dropped). Small steps (a counter that ticks, a short text) go on in a
/// headroom of an eighth of the limit; past that, no state grows at all. Shrinking, ending and
/// settling go on throughout, so users can still leave what they were doing, and sessions that
/// end or expire make room again. Sessions check the budget before they change, on their own
/// executors, so it can be passed by what the changes under way at that moment add: a request's
/// worth per executor.
public final class MemoryBudget: Sendable, Equatable {
    /// Bytes the sessions may hold together.
    public let limit: Int
    private let used = Atomic<Int>(0)

    /// What each session is charged besides its state and events: about what an idle one takes.
    public static let perSession = 5 << 10
    /// What each feature on screen past the root is charged: its model, node and place in the
    /// tree take about this (measured: 400 counters pushed took 1.2 MB), whatever its state's
    /// bytes, so a session of many small screens is not counted as a few bytes.
    public static let perFeature = 3 << 10

    /// What a session with `features` on screen, `stateBytes` of state and `eventBytes` of kept
    /// events is charged.
    static func charge(features: Int, stateBytes: Int, eventBytes: Int) -> Int {
        perSession + perFeature * max(0, features - 1) + stateBytes + eventBytes
    }

    /// A budget of `limit` bytes, none of it charged yet.
    public init(limit: Int) {
        self.limit = max(0, limit)
    }

    /// What the sessions are charged now.
    public var bytesInUse: Int { used.load(ordering: .relaxed) }

    /// Whether the sessions hold all they may: then no session is made, and none grows but by
    /// small steps.
    public var isSpent: Bool { bytesInUse >= limit }

    /// Whether the headroom past the limit is spent too: then no state grows at all.
    var headroomIsSpent: Bool { bytesInUse - limit >= limit / 8 }

    /// What one change may add to a session's state once the budget is spent, while there is
    /// headroom: a counter's next digit, a flag, a short text.
    public static let smallGrowth = 256

    /// Adds `bytes` (negative: gives them back).
    func charge(_ bytes: Int) {
        if bytes != 0 { used.add(bytes, ordering: .relaxed) }
    }

    /// Charges `bytes` whatever the budget holds, and up to `more` besides as far as the limit
    /// leaves room; returns how much of `more` was charged. In one step, so sessions restored at
    /// once share the room left instead of each finding all of it.
    func charge(_ bytes: Int, andUpTo more: Int) -> Int {
        var current = used.load(ordering: .relaxed)
        while true {
            let granted = min(max(0, more), max(0, limit - current - bytes))
            let (exchanged, found) = used.compareExchange(expected: current, desired: current + bytes + granted, ordering: .relaxed)
            if exchanged { return granted }
            current = found
        }
    }

    /// One budget is equal only to itself: sessions share it by reference.
    public static func == (left: MemoryBudget, right: MemoryBudget) -> Bool { left === right }
}
