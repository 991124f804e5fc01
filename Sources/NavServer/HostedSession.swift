import Dispatch
import NavigationCore
import SessionStorage
import Synchronization

/// A session as the server hosts it: its navigation, its credentials and its open streams.
final class HostedSession: Sendable {
    let id: String
    let feature: String
    let navigation: NavigationSession
    let events: SessionEvents
    /// One-time credentials for `?ticket=` on the event stream; in memory only.
    let tickets = StreamTickets()
    /// Only the token's hash is kept, in memory as on disk.
    let tokenHash: [UInt8]
    /// The fencing epoch this node holds it with, on a store several nodes share; nil otherwise.
    let epoch: Int?
    private let lastActive: Atomic<Int64>
    private let stored: Atomic<Bool>

    /// - Parameters:
    ///   - stored: whether the store has it already (recovered or claimed); a new session is
    ///     stored once its creation commits (`markStored`).
    ///   - idleSeconds: how long it had gone unused when it was recovered (as the store says, so
    ///     at most a year is believed), so a restart does not count as a use; none for a session
    ///     created or claimed, which a request just used.
    init(id: String, tokenHash: [UInt8], epoch: Int?, stored: Bool, navigation: NavigationSession, events: SessionEvents,
         idleSeconds: Double = 0) {
        self.id = id
        self.tokenHash = tokenHash
        self.epoch = epoch
        self.feature = navigation.feature
        self.navigation = navigation
        self.events = events
        let idle = idleSeconds.isFinite ? min(max(0, idleSeconds), 366 * 86_400) : 0
        self.lastActive = Atomic(Self.now() - Int64(idle * 1e9))
        self.stored = Atomic(stored)
    }

    /// Deletions of it this node has under way (`DELETE`, expiry). This node ends the session
    /// itself, with `end`: the announcement of its own deletion must not close the streams first.
    private let endings = Atomic<Int>(0)

    var isEnding: Bool { endings.load(ordering: .acquiring) > 0 }

    /// Around a deletion's commit: `true` before, `false` after one that did not delete it.
    func markEnding(_ ending: Bool) { endings.add(ending ? 1 : -1, ordering: .acquiringAndReleasing) }

    /// Why this node let a session go.
    enum LetGo: Int {
        case held = 0
        /// Another node took it over.
        case takenOver
        /// Another node, or a sweep, deleted it…
        case deleted
        case expired
        /// A commit of it was cut off and the store could not say whether it happened: this
        /// copy may be behind or ahead of the stored one, so the store's is read again.
        case commitUnsettled
    }

    private let letGo = Atomic<Int>(LetGo.held.rawValue)
    private var letGoReason: LetGo { LetGo(rawValue: letGo.load(ordering: .acquiring)) ?? .held }
    /// Whether this node let the session go: its streams are closed, or ended, by that, not by
    /// a rollback of a write the store refused for the same reason.
    var isLetGo: Bool { letGoReason != .held }
    /// Whether it was let go while the session lives on (taken over, or a commit left unsettled):
    /// a stream that attaches to this copy afterwards must close at once, so its client
    /// reconnects to the copy the store holds, wherever its next request claims it.
    var livesOnElsewhere: Bool { letGoReason == .takenOver || letGoReason == .commitUnsettled }
    /// Whether it was let go because a commit of it was left unsettled.
    var hadCommitUnsettled: Bool { letGoReason == .commitUnsettled }
    /// Why it ended elsewhere, if another node or a sweep deleted it.
    var endedElsewhere: NavigationSession.EndReason? {
        switch letGoReason {
        case .deleted: .deleted
        case .expired: .expired
        default: nil
        }
    }
    /// Let go for the announcement of `epoch`: a takeover's, or `SessionEpoch.deleted` or `.expired`.
    func markLetGo(epoch: Int) {
        let reason: LetGo = switch epoch {
        case SessionEpoch.deleted: .deleted
        case SessionEpoch.expired: .expired
        default: .takenOver
        }
        markLetGo(reason)
    }

    func markLetGo(_ reason: LetGo) {
        letGo.store(reason.rawValue, ordering: .releasing)
    }

    /// In the store: a session missing from it now was deleted, not still being created.
    var isStored: Bool { stored.load(ordering: .acquiring) }

    func markStored() { stored.store(true, ordering: .releasing) }

    func accepts(_ candidate: Substring?) -> Bool {
        guard let candidate else { return false }
        return TokenHash.matches(candidate, tokenHash)
    }

    func touch() {
        lastActive.store(Self.now(), ordering: .relaxed)
        usedSinceMark.store(true, ordering: .relaxed)
    }

    /// Used (a request, or an open stream) since the shared store last recorded it as used:
    /// cleared only by a record that committed, so no use goes unrecorded.
    private let usedSinceMark = Atomic<Bool>(true)

    /// Requests waiting for their effects (`?wait=true`, up to a minute): in use meanwhile,
    /// however short the idle TTL.
    private let waits = Atomic<Int>(0)

    /// Runs `body`, a request's wait, with the session counted as in use throughout.
    func inUse<Result>(during body: () async throws(NavigationError) -> Result) async throws(NavigationError) -> Result {
        waits.add(1, ordering: .relaxed)
        defer {
            touch()
            waits.subtract(1, ordering: .relaxed)
        }
        return try await body()
    }

    /// In use now: an open stream, or a request waiting.
    private var isBusy: Bool { events.count > 0 || waits.load(ordering: .relaxed) > 0 }

    /// Whether there is use to record, clearing the flag; `keepUseToRecord()` sets it again
    /// when the record failed.
    func takeUseToRecord() -> Bool {
        let used = usedSinceMark.exchange(false, ordering: .relaxed)
        return used || isBusy
    }

    func keepUseToRecord() { usedSinceMark.store(true, ordering: .relaxed) }

    /// For how long it has had no request and no open stream.
    var idleSeconds: Double {
        guard !isBusy else { return 0 }
        return Double(max(0, Self.now() - lastActive.load(ordering: .relaxed))) / 1e9
    }

    /// Idle: no request for `ttl`, none waiting, and no open stream.
    func isIdle(for ttl: Duration) -> Bool {
        guard !isBusy else { return false }
        return .nanoseconds(Self.now() - lastActive.load(ordering: .relaxed)) >= ttl
    }

    private static func now() -> Int64 {
        Int64(DispatchTime.now().uptimeNanoseconds)
    }
}

/// Random identifiers: session ids of 128 bits, tokens of 256 bits, from the system's CSPRNG.
enum Identifiers {
    static func sessionID() -> String { hex(bytes: 16) }
    static func token() -> String { hex(bytes: 32) }

    /// Whether `id` could be one `sessionID()` made: anything else is no session, without asking
    /// a shared store.
    static func isSessionID(_ id: String) -> Bool {
        id.utf8.count == 32 && id.utf8.allSatisfy { (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }
    }

    private static func hex(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(count * 2)
        for _ in 0..<count {
            let byte = UInt8.random(in: 0...255, using: &generator)
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Every hosted session, by id.
final class SessionStore: Sendable {
    private let sessions = Mutex<[String: HostedSession]>([:])
    let limit: Int?
    /// What the sessions may hold together; none is made while it is spent.
    let memory: MemoryBudget?

    init(limit: Int?, memory: MemoryBudget? = nil) {
        self.limit = limit
        self.memory = memory
    }

    var count: Int { sessions.withLock { $0.count } }

    var all: [HostedSession] { sessions.withLock { Array($0.values) } }

    /// `false` when the server hosts `limit` sessions, or when the sessions, this one charged
    /// already, hold the memory budget: then it is dropped, and gives its share back. Asked after
    /// the session is made (or claimed), so concurrent ones pass the budget by what is made at
    /// the same moment at most.
    func insert(_ session: HostedSession) -> Bool {
        sessions.withLock { sessions in
            if let limit, sessions.count >= limit { return false }
            if memory?.isSpent == true { return false }
            sessions[session.id] = session
            return true
        }
    }

    /// Sessions recovered at start, in one piece: room for all of them is made once. All of
    /// them, past `limit` too: each was acknowledged, and a lower limit than before refuses new
    /// sessions until fewer are live; it never ends one.
    func insert(recovered: [HostedSession]) {
        sessions.withLock { sessions in
            sessions.reserveCapacity(sessions.count + recovered.count)
            for session in recovered { sessions[session.id] = session }
        }
    }

    func hasRoom() -> Bool {
        if memory?.isSpent == true { return false }
        guard let limit else { return true }
        return count < limit
    }

    /// The refusal of a session there is no room for: by count, or by memory.
    var overCapacity: APIError {
        if let limit, count >= limit { return .overCapacity(sessions: limit) }
        return .overCapacity(memory: memory?.limit ?? 0)
    }

    func session(_ id: String) -> HostedSession? {
        sessions.withLock { $0[id] }
    }

    @discardableResult
    func remove(_ id: String) -> HostedSession? {
        sessions.withLock { $0.removeValue(forKey: id) }
    }

    /// Removes `hosted` if it is the copy held now (not an older one, let go and claimed again).
    func remove(identical hosted: HostedSession) -> Bool {
        sessions.withLock { sessions in
            guard sessions[hosted.id] === hosted else { return false }
            sessions[hosted.id] = nil
            return true
        }
    }

    /// Removes session `id` if it is held with an epoch under `epoch`; not for a deletion while
    /// this node is deleting it (it ends the session itself), but for a takeover all the same.
    func remove(_ id: String, olderThan epoch: Int) -> HostedSession? {
        sessions.withLock { sessions in
            guard let held = sessions[id], let heldEpoch = held.epoch, heldEpoch < epoch,
                  !(held.isEnding && SessionEpoch.isGone(epoch)) else { return nil }
            return sessions.removeValue(forKey: id)
        }
    }
}

/// Claims in flight on this node, by session: a request for a session already being claimed
/// waits for that claim instead of taking the session over a second time. What is announced of
/// a session while it is being claimed is kept for the claim to check once it holds the session
/// (another node may have taken it over again before this one could let it go).
final class SessionClaims: Sendable {
    private struct Claim {
        var waiting: [CheckedContinuation<Void, Never>] = []
        /// The highest epoch announced for the session meanwhile.
        var heard: Int?
    }

    private let inFlight = Mutex<[String: Claim]>([:])

    /// `true`: the caller claims `id` and calls `finish(id)` after. `false`: another claim of
    /// it was in flight and has finished; look for the session again.
    func begin(_ id: String) async -> Bool {
        let first = inFlight.withLock { inFlight -> Bool in
            guard inFlight[id] == nil else { return false }
            inFlight[id] = Claim()
            return true
        }
        if first { return true }
        await withCheckedContinuation { (waiting: CheckedContinuation<Void, Never>) in
            let queued = inFlight.withLock { inFlight -> Bool in
                guard inFlight[id] != nil else { return false }
                inFlight[id]?.waiting.append(waiting)
                return true
            }
            if !queued { waiting.resume() }
        }
        return false
    }

    /// The sessions being claimed now.
    var ids: [String] { inFlight.withLock { Array($0.keys) } }

    /// Keeps an announcement of `id` at `epoch` if `id` is being claimed.
    func heard(_ id: String, epoch: Int) {
        inFlight.withLock { inFlight in
            guard var claim = inFlight[id] else { return }
            claim.heard = max(claim.heard ?? epoch, epoch)
            inFlight[id] = claim
        }
    }

    /// The highest epoch announced for `id` since its claim began, if it is being claimed.
    func heardEpoch(_ id: String) -> Int? {
        inFlight.withLock { $0[id]?.heard }
    }

    /// Ends the claim of `id`; returns the highest epoch announced for it meanwhile.
    @discardableResult
    func finish(_ id: String) -> Int? {
        let claim = inFlight.withLock { $0.removeValue(forKey: id) }
        for waiting in claim?.waiting ?? [] { waiting.resume() }
        return claim?.heard
    }
}
