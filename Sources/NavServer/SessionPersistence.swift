import Dispatch
import HTTP
import NavigationCore
import SessionStorage
import Synchronization

/// How the server keeps its sessions: in a store (durable, the default) or nowhere
/// (`--store memory`). Everything that writes to the store goes through here, so the
/// store's health is known in one place: `/readyz` answers 503 while writes fail, while a
/// commit hangs (a disk that stalls, a database that stopped answering), and, on a shared
/// store, while it does not answer at all.
///
/// On a store several nodes share, sessions are claimed on demand rather than recovered at
/// start, every write of a session is fenced with the epoch it was claimed with, and a write
/// that finds the session taken over tells the server to let it go (`onLost`).
final class SessionPersistence: Sendable {
    let storage: (any SessionStorage)?
    /// The same store, when several nodes share it.
    let shared: (any SharedSessionStorage)?
    /// The same store, when it makes copies of itself (`backUp`).
    private let backups: (any BackupStorage)?
    /// The store's health as last reported, and who hears of its changes; `reported` mirrors
    /// it outside the lock, so readiness and a commit that works cost one load.
    private let health = Mutex<(reported: ReportedHealth, report: (@Sendable (HealthChange) -> Void)?)>((.healthy, nil))
    private let reported = Atomic<UInt8>(ReportedHealth.healthy.rawValue)
    /// When a commit to a shared store last came to anything, success or failure
    /// (`DispatchTime` nanoseconds).
    private let lastOutcome = Atomic<UInt64>(DispatchTime.now().uptimeNanoseconds)
    private let failedRecords = Atomic<Int>(0)
    private let recovered = Atomic<Int>(0)
    private let claimed = Atomic<Int>(0)
    private let released = Atomic<Int>(0)
    private let swept = Atomic<Int>(0)
    private let backupsWritten = Atomic<Int>(0)
    private let backupsFailed = Atomic<Int>(0)
    private let backupsSkipped = Atomic<Int>(0)
    private let backupUnderWay = Atomic<Bool>(false)
    /// When the last copy was written, in seconds since 1970; 0 before the first.
    private let lastBackup = Atomic<Int>(0)
    private let lost = Mutex<(@Sendable (_ id: String, _ olderThan: Int) -> Void)?>(nil)
    private let unsettled = Mutex<(@Sendable (_ id: String, _ epoch: Int) -> Void)?>(nil)

    init(storage: (any SessionStorage)?) {
        self.storage = storage
        self.shared = storage as? any SharedSessionStorage
        self.backups = storage as? any BackupStorage
    }

    var isDurable: Bool { storage != nil }
    var isAvailable: Bool { !isFailing && stalledFor == nil }

    /// Whether the last commit failed.
    var isFailing: Bool { reported.load(ordering: .relaxed) == ReportedHealth.failing.rawValue }

    /// How long the commit running now has taken, once that is longer than `stallLimit`.
    var stalledFor: Duration? {
        guard let running = storage?.commitRunningFor(), running > Self.stallLimit else { return nil }
        return running
    }

    /// How long a commit may take before the store counts as stalled: commits take
    /// milliseconds, and a store's own bounds on a wait (PostgreSQL's statement deadline) are
    /// longer, so readiness says so while the commit still waits.
    static let stallLimit: Duration = .seconds(5)

    /// What changed in the store's health, for the log: each change is reported once.
    enum HealthChange: Sendable {
        /// A commit failed after one that worked.
        case failing(reason: String)
        /// A commit has taken longer than `stallLimit`.
        case stalled(Duration)
        /// Commits work again.
        case recovered
    }

    /// The store's health as last reported.
    private enum ReportedHealth: UInt8 { case healthy, failing, stalled }

    /// Called on every change of the store's health, in order. Set once, before the first
    /// session is hosted.
    func onHealthChange(_ body: @escaping @Sendable (HealthChange) -> Void) {
        health.withLock { $0.report = body }
    }

    /// Moves the reported health on and tells the log, under one lock, so that lines from the
    /// writer and from the stall watch come in the order the changes happened. A failure is
    /// reported unless one is already, and a stall only while all was well (a failing store's
    /// probes may hang too: that is the same outage); only a commit that works ends either.
    private func note(_ change: HealthChange) {
        health.withLock { health in
            let next: ReportedHealth
            switch (change, health.reported) {
            case (.failing, .failing), (.stalled, .failing), (.stalled, .stalled), (.recovered, .healthy): return
            case (.failing, _): next = .failing
            case (.stalled, _): next = .stalled
            case (.recovered, _): next = .healthy
            }
            health.reported = next
            reported.store(next.rawValue, ordering: .relaxed)
            health.report?(change)
        }
    }

    /// Reports a commit that has run longer than `stallLimit`; called every second or so, on no
    /// thread the store may hold. Its end is reported by the commit that ends it.
    func watchForStall() {
        if let stalled = stalledFor { note(.stalled(stalled)) }
    }

    /// The journal a durable session writes its batches to; with `epoch`, each write is fenced.
    func journal(for id: String, epoch: Int?) -> (any SessionJournal)? {
        storage.map { StorageJournal(id: id, epoch: epoch, storage: $0, persistence: self) }
    }

    /// Called when a write found session `id` taken over: holders of an epoch under `olderThan`
    /// let it go. Set once, before the first session is hosted.
    func onLost(_ body: @escaping @Sendable (_ id: String, _ olderThan: Int) -> Void) {
        lost.withLock { $0 = body }
    }

    /// Called when a commit of session `id`, held with `epoch`, was left unsettled: its holder
    /// lets that copy go. Set once, before the first session is hosted.
    func onUnsettled(_ body: @escaping @Sendable (_ id: String, _ epoch: Int) -> Void) {
        unsettled.withLock { $0 = body }
    }

    /// A write of epoch `epoch` was fenced off: taken over, or the session is gone from the
    /// store, `deleted` or `expired` (its holders end it, `end` on their streams, as on the
    /// announcement of its end, which may come later).
    fileprivate func fencedOff(_ id: String, epoch: Int, because error: StorageError) {
        let announced = switch error {
        case .deleted: SessionEpoch.deleted
        case .expired: SessionEpoch.expired
        default: epoch + 1
        }
        lost.withLock { $0 }?(id, announced)
    }

    /// A write of epoch `epoch` may or may not be stored (`StorageError.outcomeUnknown`).
    fileprivate func leftUnsettled(_ id: String, epoch: Int) {
        unsettled.withLock { $0 }?(id, epoch)
    }

    /// Counts a session let go because another node took it over.
    func noteReleased() {
        released.add(1, ordering: .relaxed)
    }

    /// What a fenced commit came to.
    enum Committed {
        case durable
        /// The store refused the write (disk full, I/O error, unreachable).
        case failed
        /// Another node owns the session now: nothing was written.
        case lost
        /// The session is gone from the store, deleted elsewhere…
        case deleted
        /// …or expired by a sweep elsewhere: nothing was written.
        case expired
        /// The store lost its connection while committing and cannot say whether it did.
        case unsettled
    }

    /// Commits `writes` of `hosted`'s, fenced with its epoch on a shared store, and waits.
    func commit(_ writes: [StoreWrite], of hosted: HostedSession) async -> Committed {
        guard let storage else { return .durable }
        let fenced = hosted.epoch.map { [StoreWrite.fence(id: hosted.id, epoch: $0)] + writes } ?? writes
        return await withCheckedContinuation { (done: CheckedContinuation<Committed, Never>) in
            // Not from a copy let go for a commit of unknown outcome (asked on the writer, after
            // that commit's answer): it may be behind the store, and a `DELETE` checked against
            // its version (`If-Match`) would delete a version the client never saw.
            storage.commit(fenced, admissible: { !hosted.hadCommitUnsettled }) { [self] result in
                switch result {
                case .failure(.fenced): done.resume(returning: .lost)
                case .failure(.deleted): done.resume(returning: .deleted)
                case .failure(.expired): done.resume(returning: .expired)
                case .failure(.outcomeUnknown):
                    _ = noted(result)
                    done.resume(returning: .unsettled)
                default: done.resume(returning: noted(result) ? .durable : .failed)
                }
            }
        }
    }

    /// Commits `writes` and waits; `true` when they are durable (or there is no store).
    func commit(_ writes: [StoreWrite]) async -> Bool {
        guard let storage else { return true }
        return await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
            storage.commit(writes) { [self] result in
                done.resume(returning: noted(result))
            }
        }
    }

    /// How long a shared store may go without a commit before a probe asks whether it answers.
    static let quietProbeInterval: UInt64 = 5_000_000_000

    /// While commits fail, a small write now and then finds out when the store works again,
    /// so readiness comes back without waiting for a client's request. A shared store is also
    /// probed when nothing was written for a while: it is a service of its own that can go
    /// away while this node is idle, and readiness must say so before a request finds out.
    func probeIfNeeded() async {
        guard isDurable else { return }
        let quiet = DispatchTime.now().uptimeNanoseconds &- lastOutcome.load(ordering: .relaxed) > Self.quietProbeInterval
        guard isFailing || (shared != nil && quiet) else { return }
        _ = await commit([.probe])
    }

    /// Records whether a commit worked, for readiness. A fenced write, or one of a session
    /// deleted meanwhile, is no failure of the store.
    func noted(_ result: Result<Void, StorageError>) -> Bool {
        // Only a shared store is probed when quiet: no clock read on every other commit.
        if shared != nil { lastOutcome.store(DispatchTime.now().uptimeNanoseconds, ordering: .relaxed) }
        switch result {
        case .success:
            // One load per commit while all is well; the change itself is reported once.
            if reported.load(ordering: .relaxed) != ReportedHealth.healthy.rawValue { note(.recovered) }
            return true
        case .failure(let error) where !error.isStoreFault:
            // A session's write refused (taken over, gone, or behind a failed write of its
            // own): the store itself answered, or was not asked.
            return false
        case .failure(let error):
            note(.failing(reason: error.description))
            return false
        }
    }

    // MARK: - Records

    static func snapshot(_ session: DurableSession) -> SessionSnapshot {
        SessionSnapshot(version: session.version, lastSequence: session.lastSequence, nextSerial: session.nextSerial,
                        state: session.state.bytes, tree: session.navigation.bytes)
    }

    static func writes(_ entries: [JournalEntry], of id: String) -> [StoreWrite] {
        entries.flatMap { entry -> [StoreWrite] in
            let transaction = StoreWrite.transaction(id: id, SessionTransaction(
                version: entry.version, lastSequence: entry.lastSequence, nextSerial: entry.nextSerial,
                statePatch: entry.statePatch.bytes,
                events: entry.events.map { StoredEvent(sequence: $0.sequence, kind: $0.kind.rawValue, data: $0.encodedData) }))
            guard let snapshot = entry.snapshot else { return [transaction] }
            // The events go with the transaction (clients resume from them); the snapshot then
            // makes every transaction up to it unnecessary.
            return [transaction, .snapshot(id: id, Self.snapshot(snapshot))]
        }
    }

    // MARK: - Claims

    /// What claiming a session on demand came to.
    enum Claimed {
        case hosted(HostedSession)
        case notFound
        /// The token did not match (or none was given): nothing moved.
        case refused
        case failed
    }

    /// Loads session `id` from the shared store and takes it over, if `token` opens it.
    func claim(_ id: String, token: String?, catalog: FeatureCatalog, limits: SessionLimits, executor: any SessionExecutor,
               metrics: Metrics, report: @escaping @Sendable (String, String) -> Void) async -> Claimed {
        guard let shared else { return .notFound }
        // Restored inside the claim, before the epoch rises: a session this node cannot bring
        // back stays with the node that holds it.
        let restored = Mutex<Result<NavigationSession, RecoveryError>?>(nil)
        let result = await withCheckedContinuation { (done: CheckedContinuation<Result<SessionClaim, StorageError>, Never>) in
            shared.claim(id, authorize: Self.opens(token), restore: { [self] stored, epoch in
                let outcome = Result { () throws(RecoveryError) -> NavigationSession in
                    try restore(stored, epoch: epoch, catalog: catalog, limits: limits, executor: executor)
                }
                restored.withLock { $0 = outcome }
                if case .success = outcome { return true } else { return false }
            }) { done.resume(returning: $0) }
        }
        switch result {
        case .failure(let error):
            report(id, error.description)
            return .failed
        case .success(.notFound):
            return .notFound
        case .success(.refused):
            return .refused
        case .success(.unreadable):
            let reason: String
            if case .failure(let error)? = restored.withLock({ $0 }) { reason = error.description } else { reason = "the stored record does not decode" }
            report(id, reason)
            return .failed
        case .success(.claimed(let stored, let epoch)):
            guard case .success(let navigation)? = restored.withLock({ $0 }) else {
                report(id, "claimed without being restored")
                return .failed
            }
            claimed.add(1, ordering: .relaxed)
            return .hosted(HostedSession(id: id, tokenHash: stored.record.tokenHash, epoch: epoch, stored: true,
                                         navigation: navigation, events: SessionEvents(metrics: metrics)))
        }
    }

    /// Whether a stored token hash is `token`'s; no token opens nothing.
    private static func opens(_ token: String?) -> @Sendable ([UInt8]) -> Bool {
        { hash in token.map { TokenHash.matches($0, hash) } ?? false }
    }

    /// Deletes session `id`, which this node does not hold, from the shared store, if `token`
    /// opens it; the node holding it (if any) ends it there.
    func delete(_ id: String, token: String?, ifVersion: Int?) async -> Result<SessionDeletion, StorageError> {
        guard let shared else { return .success(.notFound) }
        let result = await withCheckedContinuation { (done: CheckedContinuation<Result<SessionDeletion, StorageError>, Never>) in
            shared.delete(id, ifVersion: ifVersion, authorize: Self.opens(token)) { done.resume(returning: $0) }
        }
        _ = noted(result.map { _ in })
        return result
    }

    /// The epoch session `id` has in the shared store now (`SessionEpoch.deleted` when it is
    /// gone); nil without a shared store, or when it cannot say.
    func currentEpoch(of id: String) async -> Int? {
        guard let shared else { return nil }
        let result = await withCheckedContinuation { (done: CheckedContinuation<Result<Int, StorageError>, Never>) in
            shared.currentEpoch(of: id) { done.resume(returning: $0) }
        }
        _ = noted(result.map { _ in })
        return try? result.get()
    }

    /// Expiry of the sessions no node holds, on a shared store: marks `inUse` as used now and
    /// deletes what no node has used for `idle` (nothing without it). Returns the ids deleted.
    func sweep(inUse: [String], idle: Duration?) async -> Result<[String], StorageError> {
        guard let shared else { return .success([]) }
        let result = await withCheckedContinuation { (done: CheckedContinuation<Result<[String], StorageError>, Never>) in
            shared.sweep(inUse: inUse, idle: idle) { done.resume(returning: $0) }
        }
        if case .success(let ids) = result { swept.add(ids.count, ordering: .relaxed) }
        return result
    }

    // MARK: - Recovery

    /// Brings back every stored session. A record that cannot be read is skipped and counted;
    /// the rest load. Each keeps the idle time it had when the store was closed; after a crash,
    /// when what was used since the last record is not known, none (the restart counts as a use).
    ///
    /// Rebuilding a session (decoding its state, deriving its tree) is most of a restart's time,
    /// and sessions do not depend on each other: they are rebuilt a batch at a time on every core,
    /// while a thread of its own reads the next batches from the store (a few at most, so what
    /// is read ahead stays small). A thread, not a queue: Dispatch counts a busy worker as a
    /// core taken and would start the rebuilding's second worker only a second later. Sessions
    /// are dealt to `executors` in turn.
    func recover(catalog: FeatureCatalog, limits: SessionLimits, metrics: Metrics, executors: [any SessionExecutor],
                 report: (String, String) -> Void) throws(StorageError) -> [HostedSession] {
        guard let storage else { return [] }
        let handoff = RecoveryHandoff()
        let reader: LoopThread
        do {
            reader = try LoopThread.start {
                var batch: [StoredSession] = []
                let outcome = Result { () throws(StorageError) -> [String] in
                    try storage.load(within: limits.memory?.limit ?? .max, perSession: MemoryBudget.perSession) { stored in
                        batch.append(stored)
                        if batch.count == RecoveryBatch.size {
                            handoff.put(batch)
                            batch = []
                        }
                    }
                }
                if !batch.isEmpty { handoff.put(batch) }
                handoff.finish(outcome)
            }
        } catch {
            throw .cannotOpen("no thread to read the store: \(error)")
        }
        var sessions: [HostedSession] = []
        var failed: [(String, String)] = []
        var dealt = 0
        while let batch = handoff.take() {
            let rebuilt = RecoveryBatch(count: batch.count)
            DispatchQueue.concurrentPerform(iterations: batch.count) { [batch, dealt] index in
                let stored = batch[index]
                do throws(RecoveryError) {
                    let navigation = try restore(stored, epoch: nil, catalog: catalog, limits: limits,
                                                 executor: executors[(dealt + index) % executors.count])
                    rebuilt.set(index, .success(HostedSession(id: stored.record.id, tokenHash: stored.record.tokenHash, epoch: nil, stored: true,
                                                              navigation: navigation, events: SessionEvents(metrics: metrics),
                                                              idleSeconds: stored.idleSeconds ?? 0)))
                } catch {
                    rebuilt.set(index, .failure(error))
                }
            }
            for (stored, result) in zip(batch, rebuilt.results) {
                switch result {
                case .success(let session)?: sessions.append(session)
                case .failure(let error)?: failed.append((stored.record.id, error.description))
                case nil: failed.append((stored.record.id, "not rebuilt"))
                }
            }
            dealt += batch.count
        }
        reader.join()
        let undecodable = try handoff.outcome.get()
        failed += undecodable.map { ($0, "the stored record does not decode") }
        for (id, reason) in failed { report(id, reason) }
        failedRecords.store(failed.count, ordering: .relaxed)
        recovered.store(sessions.count, ordering: .relaxed)
        return sessions
    }

    private func restore(_ stored: StoredSession, epoch: Int?, catalog: FeatureCatalog, limits: SessionLimits,
                         executor: any SessionExecutor) throws(RecoveryError) -> NavigationSession {
        let snapshot = DurableSession(
            version: stored.snapshot.version, lastSequence: stored.snapshot.lastSequence, nextSerial: stored.snapshot.nextSerial,
            state: try Self.parse(stored.snapshot.state, "snapshot state"), navigation: try Self.parse(stored.snapshot.tree, "snapshot tree"))
        var entries: [JournalEntry] = []
        for transaction in stored.transactions {
            entries.append(JournalEntry(
                version: transaction.version, lastSequence: transaction.lastSequence, nextSerial: transaction.nextSerial,
                events: try transaction.events.map(Self.event), statePatch: try Self.parse(transaction.statePatch, "state patch"),
                snapshot: nil))
        }
        let events = try stored.events.map(Self.event)
        guard let journal = journal(for: stored.record.id, epoch: epoch) else { throw RecoveryError(description: "no store") }
        return try catalog.restoreSession(feature: stored.record.feature, snapshot, replaying: entries, events: events, limits: limits,
                                          journal: journal, executor: executor)
    }

    private static func parse(_ bytes: [UInt8], _ what: String) throws(RecoveryError) -> JSON {
        do { return try JSONParser.parse(bytes, maximumDepth: JSONParser.storedDocumentDepth) } catch {
            throw RecoveryError(description: "\(what): \(error.description)")
        }
    }

    private static func event(_ stored: StoredEvent) throws(RecoveryError) -> NavigationEvent {
        guard let kind = NavigationEvent.Kind(rawValue: stored.kind) else { throw RecoveryError(description: "event kind \(stored.kind)") }
        return NavigationEvent(sequence: stored.sequence, kind: kind, data: try parse(stored.data, "event \(stored.sequence)"))
    }

    // MARK: - Backups

    /// What came of asking for a copy.
    enum BackupRequest {
        /// Under way: the completion says how it ended.
        case started
        /// One is under way already, which this adds nothing to (a second signal, a cron job's
        /// retry): not a failure.
        case alreadyUnderWay
        /// The store makes no copies of its own: memory keeps nothing, PostgreSQL has tools of its own.
        case unsupported
    }

    /// Writes a copy of the store (`BackupStorage.backUp`), counted for `/metrics` so that an
    /// alert can say when none was made for too long.
    func backUp(into directory: String, completion: @escaping @Sendable (Result<StoreBackup, StorageError>) -> Void) -> BackupRequest {
        guard let backups else { return .unsupported }
        guard backupUnderWay.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else {
            backupsSkipped.add(1, ordering: .relaxed)
            return .alreadyUnderWay
        }
        backups.backUp(into: directory) { [self] result in
            switch result {
            case .success:
                backupsWritten.add(1, ordering: .relaxed)
                lastBackup.store(Int(secondsSince1970()), ordering: .relaxed)
            case .failure:
                backupsFailed.add(1, ordering: .relaxed)
            }
            backupUnderWay.store(false, ordering: .releasing)
            completion(result)
        }
        return .started
    }

    /// Counts the newest copy in `directory` from before this process as the last one written,
    /// so a restart does not read as a long time without one.
    func noteEarlierBackups(in directory: String) {
        guard let seconds = backups?.newestBackup(in: directory) else { return }
        lastBackup.store(seconds, ordering: .relaxed)
    }

    // MARK: - Metrics

    /// The store's part of `/metrics`.
    func renderMetrics() -> String {
        guard let storage else { return "" }
        let statistics = storage.statistics()
        var out = PrometheusExposition()
        func single(_ name: String, _ help: String, _ value: some CustomStringConvertible, type: String = "gauge") {
            out.family(name, type, help)
            out.sample(name, value)
        }
        single("navd_store_available", "Whether the session store takes writes: its last commit succeeded, and none has run longer than 5 s.", isAvailable ? 1 : 0)
        single("navd_sessions_recovered", "Sessions brought back from the store at start.", recovered.load(ordering: .relaxed))
        single("navd_sessions_unreadable", "Stored sessions skipped at start because their records did not decode.",
              failedRecords.load(ordering: .relaxed))
        single("navd_store_commits_total", "Commits synced to disk.", statistics.commits, type: "counter")
        single("navd_store_commit_failures_total", "Commits that failed and were rolled back.", statistics.failedCommits, type: "counter")
        single("navd_store_writes_total", "Requests and session batches made durable; over commits, the mean batch.",
              statistics.writes, type: "counter")
        out.family("navd_store_commit_seconds", "histogram", "Time to commit and sync one batch.")
        out.histogram("navd_store_commit_seconds", bounds: statistics.latencyBounds, cumulativeCounts: statistics.latencyCounts,
                      sum: statistics.latencySum, count: statistics.commits)
        out.family("navd_store_batch_writes", "histogram", "Requests and session batches sharing one commit.")
        out.histogram("navd_store_batch_writes", bounds: statistics.batchBounds, cumulativeCounts: statistics.batchCounts,
                      sum: Double(statistics.writes), count: statistics.commits)
        single("navd_store_bytes", "Bytes the session store takes on disk (database and log).", statistics.bytesOnDisk)
        if backups != nil {
            out.family("navd_store_backups_total", "counter", "Copies of the store asked for (SIGUSR1), by what came of them.")
            out.sample("navd_store_backups_total", labels: #"result="written""#, backupsWritten.load(ordering: .relaxed))
            out.sample("navd_store_backups_total", labels: #"result="failed""#, backupsFailed.load(ordering: .relaxed))
            out.sample("navd_store_backups_total", labels: #"result="skipped""#, backupsSkipped.load(ordering: .relaxed))
            single("navd_store_last_backup_timestamp_seconds", "When the last copy of the store in the backup directory was written, in seconds since 1970; 0 before the first.",
                   lastBackup.load(ordering: .relaxed))
        }
        if shared != nil {
            single("navd_sessions_claimed_total", "Sessions this node loaded from the shared store and took over.",
                   claimed.load(ordering: .relaxed), type: "counter")
            single("navd_sessions_released_total", "Sessions this node let go because another node took them over.",
                   released.load(ordering: .relaxed), type: "counter")
            single("navd_sessions_swept_total", "Idle sessions this node deleted from the shared store (held by no node, or idle where held).",
                   swept.load(ordering: .relaxed), type: "counter")
        }
        return out.text
    }
}

/// Batches read from the store on their way to be rebuilt, at most `readAhead` at once.
private final class RecoveryHandoff: Sendable {
    static let readAhead = 4
    private let room = DispatchSemaphore(value: readAhead)
    private let ready = DispatchSemaphore(value: 0)
    private let state = Mutex<(batches: [[StoredSession]], outcome: Result<[String], StorageError>?)>(([], nil))

    /// Waits while `readAhead` batches are waiting already.
    func put(_ batch: [StoredSession]) {
        room.wait()
        state.withLock { $0.batches.append(batch) }
        ready.signal()
    }

    /// The reading is over, with the ids of records that failed to decode or the store's error.
    func finish(_ outcome: Result<[String], StorageError>) {
        state.withLock { $0.outcome = outcome }
        ready.signal()
    }

    /// The next batch, in the order read; nil once every batch was taken and the reading is over.
    func take() -> [StoredSession]? {
        ready.wait()
        let batch = state.withLock { $0.batches.isEmpty ? nil : $0.batches.removeFirst() }
        if batch != nil { room.signal() }
        return batch
    }

    var outcome: Result<[String], StorageError> {
        state.withLock { $0.outcome } ?? .failure(.unavailable("the store was not read"))
    }
}

/// Sessions being rebuilt side by side: each index is written by one worker only, and read
/// once they have all finished.
private final class RecoveryBatch: @unchecked Sendable {
    static let size = 256
    private let slots: UnsafeMutableBufferPointer<Result<HostedSession, RecoveryError>?>

    init(count: Int) {
        slots = .allocate(capacity: count)
        slots.initialize(repeating: nil)
    }

    deinit {
        slots.deinitialize()
        slots.deallocate()
    }

    func set(_ index: Int, _ result: Result<HostedSession, RecoveryError>) { slots[index] = result }

    var results: [Result<HostedSession, RecoveryError>?] { Array(slots) }
}

/// A session's batches, written to the store as its transactions, fenced with the session's
/// epoch on a shared store.
private final class StorageJournal: SessionJournal {
    let id: String
    let epoch: Int?
    let storage: any SessionStorage
    let persistence: SessionPersistence
    /// The newest generation a write of which failed: its later writes must fail too.
    private let failedGeneration = Mutex<Int?>(nil)
    /// Set when a write's outcome is unknown: this copy is let go, and no write of it, whatever
    /// its generation, may reach the store (a request that found the copy just before may
    /// still try, on the state it rolled back to).
    private let closed = Atomic<Bool>(false)

    init(id: String, epoch: Int?, storage: any SessionStorage, persistence: SessionPersistence) {
        self.id = id
        self.epoch = epoch
        self.storage = storage
        self.persistence = persistence
    }

    var takesWrites: Bool { persistence.isAvailable }

    func write(_ entries: [JournalEntry], generation: Int, completion: @escaping @Sendable (Bool) -> Void) {
        let persistence = persistence
        let writes = SessionPersistence.writes(entries, of: id)
        storage.commit(epoch.map { [.fence(id: id, epoch: $0)] + writes } ?? writes, admissible: { [self] in
            !closed.load(ordering: .acquiring) && failedGeneration.withLock { $0 != generation }
        }, completion: { [self] result in
            // Recorded on the store's writer, before it asks about any later write; the session
            // hears of it off the writer (it copes with outcomes in any order).
            if case .failure = result { failedGeneration.withLock { $0 = max($0 ?? generation, generation) } }
            // Let go before the session hears of the failure, so the request it fails finds the
            // session gone and answers as this node would for a session it never had.
            switch result {
            case .failure(let error) where error.isFencedOff: if let epoch { persistence.fencedOff(id, epoch: epoch, because: error) }
            case .failure(.outcomeUnknown):
                closed.store(true, ordering: .releasing)
                if let epoch { persistence.leftUnsettled(id, epoch: epoch) }
            default: break
            }
            // The session hears of it on its own executor (its event loop), handed over with the
            // rest of the commit's answers (`GroupCommit.CompletionRound`).
            completion(persistence.noted(result))
        })
    }
}
