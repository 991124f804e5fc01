import Foundation
import SessionStorage
import Synchronization
import Testing

/// What every storage engine owes the server, whatever it keeps on disk: each engine's suite
/// runs these scenarios on a store of its own, then checks its own tables. A new engine passes
/// them before it is trusted with sessions.
struct StoreContract {
    /// Opens the suite's store again (the same file or database), with `retention` or the
    /// suite's own buffer.
    let open: (_ retention: EventRetention?) throws -> any SessionStorage

    /// What is committed comes back after the store is closed and opened again: the record with
    /// its token's hash, the snapshot, the transactions in order with their extras, the events.
    func whatIsCommittedComesBack() throws {
        let store = try open(nil)
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        try commit(store, [.transaction(id: "a", transaction(version: 1, events: 1...2, extras: #"{"deadline":1}"#)),
                           .create(record("b"), snapshot(version: 0, last: 0))])
        try commit(store, [.transaction(id: "a", transaction(version: 2, events: 3...3))])
        store.close()

        let loaded = try reload()
        #expect(loaded.failed.isEmpty)
        #expect(loaded.sessions.map(\.record.id).sorted() == ["a", "b"])
        let a = try #require(loaded.sessions.first { $0.record.id == "a" })
        #expect(a.record == record("a"), "the token's hash, the feature and the creation time, exactly")
        #expect(a.snapshot == snapshot(version: 0, last: 0))
        #expect(a.transactions == [transaction(version: 1, events: 1...2, extras: #"{"deadline":1}"#), transaction(version: 2, events: 3...3)])
        #expect(a.events.map(\.sequence) == [1, 2, 3])
    }

    /// Twelve transactions, then a snapshot of them with a thirteenth: only the thirteenth is
    /// left to replay, and the events are what a buffer of eight holds. (A buffer of eight: the
    /// suites open their stores with `retention`.)
    func aSnapshotDropsTheTransactionsItCovers() throws {
        let store = try open(nil)
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        for version in 1...12 {
            try commit(store, [.transaction(id: "a", transaction(version: version, events: version...version))])
        }
        try commit(store, [.snapshot(id: "a", snapshot(version: 12, last: 12, state: #"{"count":12}"#)),
                           .transaction(id: "a", transaction(version: 13, events: 13...13))])
        store.close()

        let a = try #require(try reload().sessions.first)
        #expect(a.snapshot == snapshot(version: 12, last: 12, state: #"{"count":12}"#))
        #expect(a.transactions == [transaction(version: 13, events: 13...13)], "the snapshot covers 1…12")
        #expect(a.events.map(\.sequence) == Array(6...13), "what the buffer of eight holds")
    }

    /// Five events of 1,000 bytes under a buffer of 2,500 bytes (and room for 100 by count):
    /// the newest two are kept.
    func eventsAreTrimmedByBytes(_ retention: EventRetention) throws {
        let store = try open(retention)
        let big = "\"" + String(repeating: "x", count: 998) + "\""  // 1000 bytes
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        for version in 1...5 {
            try commit(store, [.transaction(id: "a", transaction(version: version, events: version...version, data: big))])
        }
        try commit(store, [.snapshot(id: "a", snapshot(version: 5, last: 5))])
        store.close()
        let a = try #require(try reload(retention).sessions.first)
        #expect(a.events.map(\.sequence) == [4, 5], "the newest events within 2,500 bytes")
    }

    /// A deleted session does not come back, nor does a batch of it that was still on its way;
    /// its neighbour does.
    func aDeletedSessionIsGone() throws {
        let store = try open(nil)
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0)), .create(record("b"), snapshot(version: 0, last: 0)),
                           .transaction(id: "a", transaction(version: 1, events: 1...1))])
        try commit(store, [.delete(id: "a")])
        try commit(store, [.transaction(id: "a", transaction(version: 2, events: 2...2))])
        store.close()
        #expect(try reload().sessions.map(\.record.id) == ["b"])
    }

    /// 64 sessions committing ten transactions each, at once: every write lands, in order, and
    /// requests that arrive during a commit share the next one. The statistics are returned
    /// for the engine's own checks.
    func concurrentCommitsShareCommits() async throws -> StorageStatistics {
        let store = try open(nil)
        try commit(store, (0..<64).map { .create(record("s\($0)"), snapshot(version: 0, last: 0)) })
        await withTaskGroup(of: Void.self) { group in
            for session in 0..<64 {
                group.addTask {
                    for version in 1...10 {
                        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                            store.commit([.transaction(id: "s\(session)", transaction(version: version, events: version...version))]) { _ in done.resume() }
                        }
                    }
                }
            }
        }
        let statistics = store.statistics()
        #expect(statistics.writes == 641)
        #expect(statistics.failedCommits == 0)
        #expect(statistics.commits < statistics.writes, "requests that arrive during a commit share the next one")
        // Cumulative counts: the last bound (2.5 s) holds every commit but one slower, which a
        // busy machine can make.
        #expect(statistics.latencyCounts == statistics.latencyCounts.sorted())
        #expect((statistics.latencyCounts.last ?? 0) > 0 && (statistics.latencyCounts.last ?? 0) <= statistics.commits)
        store.close()
        let sessions = try reload().sessions
        #expect(sessions.count == 64)
        #expect(sessions.allSatisfy { $0.transactions.map(\.version) == Array(1...10) })
        return statistics
    }

    /// A session's writes are pipelined, each a patch on the one before: once one fails, a later
    /// one that depends on it is refused unwritten, in the same batch or a later one, while an
    /// independent neighbour is still committed.
    func aWriteWhoseEarlierWriteFailedIsRefusedUnwritten(rounds: Int) throws {
        let store = try open(nil)
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0)), .create(record("c"), snapshot(version: 0, last: 0))])
        for round in 1...rounds {
            let failed = Atomic<Bool>(false)
            let results = Mutex<[String: Bool]>([:])
            let done = DispatchSemaphore(value: 0)
            func finish(_ name: String) -> @Sendable (Result<Void, StorageError>) -> Void {
                { result in
                    if name == "bad", case .failure = result { failed.store(true, ordering: .relaxed) }
                    // Refused before the store was asked, which says nothing of the store's health.
                    if name == "dependent", case .failure(let error) = result {
                        #expect(error == .notAttempted("an earlier write of this session failed"))
                        #expect(!error.isStoreFault)
                    }
                    results.withLock { $0[name] = (try? result.get()) != nil }
                    done.signal()
                }
            }
            // A create of an existing id fails; the transaction after it depends on it.
            store.commit([.create(record("a"), snapshot(version: 0, last: 0))], completion: finish("bad"))
            store.commit([.transaction(id: "a", transaction(version: round, events: round...round))],
                         admissible: { !failed.load(ordering: .relaxed) }, completion: finish("dependent"))
            store.commit([.transaction(id: "c", transaction(version: round, events: round...round))], completion: finish("neighbour"))
            for _ in 0..<3 { done.wait() }
            #expect(results.withLock { $0 } == ["bad": false, "dependent": false, "neighbour": true])
        }
        store.close()
        let sessions = try reload().sessions
        #expect(sessions.first { $0.record.id == "a" }?.transactions.isEmpty == true, "nothing of the refused writes is stored")
        #expect(sessions.first { $0.record.id == "c" }?.transactions.map(\.version) == Array(1...rounds))
    }

    /// Opens the store again, reads back everything and closes it, so the suite may look at
    /// its tables.
    private func reload(_ retention: EventRetention? = nil) throws -> LoadedSessions {
        let store = try open(retention)
        defer { store.close() }
        return try store.loadAll()
    }
}

// MARK: - Fixtures every engine's suite shares

/// A counter session's record, its token's hash derived from its id.
func record(_ id: String) -> SessionRecord {
    SessionRecord(id: id, tokenHash: TokenHash.sha256(Array("token-\(id)".utf8)), feature: "counter", created: 1_700_000_000.5)
}

func snapshot(version: Int, last: Int, state: String = #"{"count":0}"#) -> SessionSnapshot {
    SessionSnapshot(version: version, lastSequence: last, nextSerial: 7, state: Array(state.utf8), tree: Array(#"{"id":"root"}"#.utf8),
                    extras: Array(#"{"deadline":12.5}"#.utf8))
}

/// A transaction that sets the count to its version, with one `state` event per sequence number.
func transaction(version: Int, events: ClosedRange<Int>, data: String = #"{"count":1}"#, extras: String? = nil) -> SessionTransaction {
    SessionTransaction(version: version, lastSequence: events.upperBound, nextSerial: 7 + version,
                       statePatch: Array(#"[{"op":"replace","path":"/count","value":\#(version)}]"#.utf8),
                       events: events.map { StoredEvent(sequence: $0, kind: "state", data: Array(data.utf8)) },
                       extras: extras.map { Array($0.utf8) })
}

/// Commits `writes` and waits for the answer; a failure throws.
func commit(_ store: some SessionStorage, _ writes: [StoreWrite]) throws {
    let outcome = Mutex<Result<Void, StorageError>?>(nil)
    let done = DispatchSemaphore(value: 0)
    store.commit(writes) { result in
        outcome.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    try outcome.withLock { $0 }?.get()
}
