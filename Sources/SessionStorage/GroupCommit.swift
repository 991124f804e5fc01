import Dispatch
import Synchronization

/// Group commit, the part every storage engine shares: one writer commits, in one transaction,
/// whatever requests arrived while the previous commit was syncing, so concurrent requests
/// share a sync. The engine says how a batch is written (`commitTogether`); this decides which
/// requests go together and in what order, and answers them.
///
/// A request may depend on an earlier one (`admissible`, asked on the writer right before it
/// would be applied); completions run on the writer, in order, before any later request is
/// asked, so a failure is known to everything behind it.
///
/// A request may also be fenced (`StoreWrite.fence`): the engine then reports, per request,
/// whether its fence held; one that did not wrote nothing and fails alone with `.fenced`,
/// while its neighbours commit.
public final class GroupCommit: Sendable {
    public typealias Completion = @Sendable (Result<Void, StorageError>) -> Void
    /// Writes every request's writes, in order, in one transaction; on success, for each
    /// request, what became of it.
    public typealias Committer = @Sendable (_ requests: [[StoreWrite]]) -> Result<[Verdict], StorageError>

    /// What a commit did with one request.
    public enum Verdict: Sendable, Equatable {
        case written
        /// Its fence did not hold, and none of it was written: another node took the session over…
        case fenced
        /// …or the session is gone from the store: deleted…
        case deleted
        /// …or expired by a sweep.
        case expired
    }

    private struct Request: Sendable {
        let writes: [StoreWrite]
        let admissible: @Sendable () -> Bool
        let completion: Completion

        /// Completes it unwritten when what it depends on failed; false then.
        func admitted() -> Bool {
            guard admissible() else {
                completion(.failure(.notAttempted("an earlier write of this session failed")))
                return false
            }
            return true
        }
    }

    private struct Pending {
        var requests: [Request] = []
        var draining = false
        var closed = false
    }

    /// Runs the completions of one commit, given as one piece: a server whose completions each
    /// post to an event loop holds those posts back until the last, so a commit takes a loop's
    /// lock, and wakes it, once for what follows on for it instead of once per request. Nothing
    /// in a round may wait for what it posts.
    public typealias CompletionRound = @Sendable (_ completions: () -> Void) -> Void

    private let writer: DispatchQueue
    private let pending = Mutex(Pending())
    /// When the commit running now began (`DispatchTime` nanoseconds), 0 when none runs.
    private let runningSince = Atomic<UInt64>(0)
    private let completionRound: CompletionRound

    public init(label: String, completionRound: @escaping CompletionRound = { $0() }) {
        writer = DispatchQueue(label: label, qos: .userInitiated)
        self.completionRound = completionRound
    }

    /// Queues `writes`; the writer commits them with whatever else is pending, through
    /// `commitTogether`, after `afterRound` of the commit before.
    public func submit(_ writes: [StoreWrite], admissible: @escaping @Sendable () -> Bool, completion: @escaping Completion,
                       commitTogether: @escaping Committer, afterRound: @escaping @Sendable () -> Void = {}) {
        enum Next { case refuse, wait, drain }
        let next = pending.withLock { pending -> Next in
            guard !pending.closed else { return .refuse }
            pending.requests.append(Request(writes: writes, admissible: admissible, completion: completion))
            guard !pending.draining else { return .wait }
            pending.draining = true
            return .drain
        }
        switch next {
        case .refuse: completion(.failure(.unavailable("the store is closed")))
        case .wait: break
        case .drain: writer.async { self.drain(commitTogether, afterRound) }
        }
    }

    /// How long the commit running now has taken so far; nil when none runs. Commits take
    /// milliseconds: one that takes seconds is stuck on the engine (a disk that hangs, a
    /// database that stopped answering), which is worth saying before it fails, if it ever does.
    public var runningFor: Duration? {
        let since = runningSince.load(ordering: .relaxed)
        guard since != 0 else { return nil }
        return .nanoseconds(Int64(bitPattern: DispatchTime.now().uptimeNanoseconds &- since))
    }

    /// Work of the writer's that commits wait behind, timed for `runningFor`.
    private func timed<Value>(_ work: () -> Value) -> Value {
        runningSince.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed)
        defer { runningSince.store(0, ordering: .relaxed) }
        return work()
    }

    /// Runs `work` on the writer, between commits.
    public func onWriter(_ work: @escaping @Sendable () -> Void) {
        writer.async(execute: work)
    }

    /// Refuses what comes next and waits for every commit already handed over.
    public func close() {
        pending.withLock { $0.closed = true }
        writer.sync {}
    }

    private static func outcome(_ verdict: Verdict, _ request: Request) -> Result<Void, StorageError> {
        let id: String
        if case .fence(let fenced, _)? = request.writes.first { id = fenced } else { id = "" }
        switch verdict {
        case .written: return .success(())
        case .fenced: return .failure(.fenced(id))
        case .deleted: return .failure(.deleted(id))
        case .expired: return .failure(.expired(id))
        }
    }

    /// Commits everything that is pending, one transaction per round, until nothing is.
    private func drain(_ commitTogether: Committer, _ afterRound: () -> Void) {
        while true {
            let batch = pending.withLock { pending -> [Request] in
                let batch = pending.requests
                pending.requests.removeAll(keepingCapacity: true)
                if batch.isEmpty { pending.draining = false }
                return batch
            }
            if batch.isEmpty { return }
            let admitted = batch.filter { $0.admitted() }
            if admitted.isEmpty { continue }
            let result = timed { commitTogether(admitted.map(\.writes)) }
            complete(admitted, result, commitTogether)
            // Timed too (a store's size measured, pages given back): commits queued wait for it.
            timed(afterRound)
        }
    }

    /// Answers every request of a commit, in order.
    private func complete(_ admitted: [Request], _ result: Result<[Verdict], StorageError>, _ commitTogether: Committer) {
        switch result {
        case .success(let verdicts):
            completionRound {
                for (request, verdict) in zip(admitted, verdicts) { request.completion(Self.outcome(verdict, request)) }
            }
        case .failure(let error) where admitted.count > 1 && !error.leavesTheBatchUnknown && !error.isUnanswered:
            // One request's bad write must not fail its neighbours': on failure, each
            // request is tried alone (a full disk fails them all again, quickly). Asked
            // again, since a failure just before may be one it depends on. Each is answered
            // as its own commit ends, not after every other's. Not a batch that may have been
            // stored: written again, its requests would be stored twice. Nor one the store
            // never answered; and once a request alone goes unanswered, the rest are not tried:
            // each would wait as long again.
            var unanswered: StorageError?
            for request in admitted where request.admitted() {
                let result = unanswered.map { .failure($0) }
                    ?? timed { commitTogether([request.writes]) }.flatMap { Self.outcome($0.first ?? .fenced, request) }
                if case .failure(let error) = result, error.isUnanswered { unanswered = error }
                completionRound { request.completion(result) }
            }
        case .failure(let error):
            completionRound {
                for request in admitted { request.completion(.failure(error)) }
            }
        }
    }
}

extension StorageError {
    fileprivate var leavesTheBatchUnknown: Bool {
        if case .outcomeUnknown = self { return true }
        return false
    }

    fileprivate var isUnanswered: Bool {
        if case .unreachable = self { return true }
        return false
    }
}
