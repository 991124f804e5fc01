import NavigationCore
import Synchronization

/// Caps the fetches in flight, in total and per session, around another client, so one session
/// tapping away cannot starve every other session's fetch. Over a cap a fetch fails at once,
/// and the alert says why.
public struct LimitedFactClient: FactClient {
    public struct Limits: Sendable, Equatable {
        /// Fetches running at once, all sessions together.
        public var total: Int
        /// Fetches one session may run at once (a counter runs one at a time; a session can
        /// hold many counters).
        public var perSession: Int

        public init(total: Int, perSession: Int) {
            self.total = total
            self.perSession = perSession
        }
    }

    private struct InFlight {
        var total = 0
        var bySession: [EffectOwner: Int] = [:]
    }

    public let base: any FactClient
    public let limits: Limits
    private let inFlight: Gate

    public init(base: any FactClient, limits: Limits) {
        self.base = base
        self.limits = limits
        inFlight = Gate()
    }

    public func fact(about number: Int) async throws(FactError) -> String {
        let owner = EffectOwner.current
        try inFlight.enter(owner, limits)
        defer { inFlight.leave(owner) }
        return try await base.fact(about: number)
    }

    /// How many fetches run, shared by every copy of the client.
    private final class Gate: Sendable {
        private let counts = Mutex(InFlight())

        func enter(_ owner: EffectOwner?, _ limits: Limits) throws(FactError) {
            let refusal: FactError? = counts.withLock { counts in
                if let owner, counts.bySession[owner, default: 0] >= limits.perSession {
                    return .tooManyForSession(limit: limits.perSession)
                }
                guard counts.total < limits.total else { return .tooManyRequests }
                counts.total += 1
                if let owner { counts.bySession[owner, default: 0] += 1 }
                return nil
            }
            if let refusal { throw refusal }
        }

        func leave(_ owner: EffectOwner?) {
            counts.withLock { counts in
                counts.total -= 1
                guard let owner else { return }
                let remaining = counts.bySession[owner, default: 1] - 1
                counts.bySession[owner] = remaining > 0 ? remaining : nil
            }
        }
    }
}
