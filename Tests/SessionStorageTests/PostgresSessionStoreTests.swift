import Foundation
@testable import PostgresStorage
import SessionStorage
import Synchronization
import Testing
import TestSupport

/// The PostgreSQL engine against a real server this test process starts on loopback: what goes
/// in comes out on a new connection, a snapshot drops what it covers, a deleted session leaves
/// no row, concurrent requests share commits, and nodes starting together migrate safely.
@Suite(.enabled(if: PostgresServer.isAvailable, "no PostgreSQL server could be started here (initdb/pg_ctl missing, or no user to run it as)"))
struct PostgresSessionStoreTests {
    let url: String
    let retention = EventRetention(count: 8, bytes: 1 << 20)

    init() async throws {
        // createdb blocks: off the cooperative pool, which other tests' servers share.
        url = try await offThePool { try PostgresServer.freshDatabase() }
    }

    func open(_ retention: EventRetention? = nil) throws -> PostgresSessionStore {
        try PostgresSessionStore(url: url, retention: retention ?? self.retention)
    }

    func record(_ id: String) -> SessionRecord {
        SessionRecord(id: id, tokenHash: TokenHash.sha256(Array("token-\(id)".utf8)), feature: "counter", created: 1_700_000_000.5)
    }

    func snapshot(version: Int, last: Int, state: String = #"{"count":0}"#) -> SessionSnapshot {
        SessionSnapshot(version: version, lastSequence: last, nextSerial: 7, state: Array(state.utf8), tree: Array(#"{"id":"root"}"#.utf8),
                        extras: Array(#"{"deadline":12.5}"#.utf8))
    }

    func transaction(version: Int, events: ClosedRange<Int>, data: String = #"{"count":1}"#, extras: String? = nil) -> SessionTransaction {
        SessionTransaction(version: version, lastSequence: events.upperBound, nextSerial: 7 + version,
                           statePatch: Array(#"[{"op":"replace","path":"/count","value":\#(version)}]"#.utf8),
                           events: events.map { StoredEvent(sequence: $0, kind: "state", data: Array(data.utf8)) },
                           extras: extras.map { Array($0.utf8) })
    }

    @Test func whatIsCommittedComesBackOnANewConnection() throws {
        let store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        try commit(store, [.transaction(id: "a", transaction(version: 1, events: 1...2, extras: #"{"deadline":1}"#)),
                           .create(record("b"), snapshot(version: 0, last: 0))])
        try commit(store, [.transaction(id: "a", transaction(version: 2, events: 3...3))])
        store.close()

        let loaded = try open().loadAll()
        #expect(loaded.failed.isEmpty)
        #expect(loaded.sessions.map(\.record.id) == ["a", "b"])
        let a = try #require(loaded.sessions.first { $0.record.id == "a" })
        #expect(a.record == record("a"), "the token's hash, the feature and the creation time, exactly")
        #expect(a.snapshot == snapshot(version: 0, last: 0))
        #expect(a.transactions == [transaction(version: 1, events: 1...2, extras: #"{"deadline":1}"#), transaction(version: 2, events: 3...3)])
        #expect(a.events.map(\.sequence) == [1, 2, 3])
        // Only the hash is stored: the token itself is nowhere in the table.
        let stored = try server().query("SELECT encode(token_hash, 'hex') FROM navd_sessions WHERE id = 'a'", database: database)
        #expect(stored == [TokenHash.sha256(Array("token-a".utf8)).map { String(format: "%02x", $0) }.joined()])
    }

    @Test func sessionsLoadInPagesInIdOrder() throws {
        let store = try open()
        let ids = (0..<1100).map { String(format: "s%05d", $0) }
        try commit(store, ids.map { .create(record($0), snapshot(version: 0, last: 0)) })
        try commit(store, [.transaction(id: "s00511", transaction(version: 1, events: 1...1)),
                           .transaction(id: "s00512", transaction(version: 1, events: 1...1))])
        store.close()
        var seen: [String] = []
        let failed = try open().load { session in
            seen.append(session.record.id)
            if ["s00511", "s00512"].contains(session.record.id) { #expect(session.transactions.map(\.version) == [1]) }
        }
        #expect(failed.isEmpty)
        #expect(seen == ids, "every session once, across page boundaries")
    }

    @Test func aSnapshotDropsTheTransactionsItCoversAndTrimsEventsToTheBuffer() throws {
        let store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        for version in 1...12 {
            try commit(store, [.transaction(id: "a", transaction(version: version, events: version...version))])
        }
        try commit(store, [.snapshot(id: "a", snapshot(version: 12, last: 12, state: #"{"count":12}"#)),
                           .transaction(id: "a", transaction(version: 13, events: 13...13))])
        store.close()

        let a = try #require(try open().loadAll().sessions.first)
        #expect(a.snapshot == snapshot(version: 12, last: 12, state: #"{"count":12}"#))
        #expect(a.transactions == [transaction(version: 13, events: 13...13)], "the snapshot covers 1…12")
        #expect(try server().query("SELECT count(*) FROM navd_events WHERE session = 'a'", database: database) == ["9"],
                "eight kept at the snapshot (5…12), then 13")
        #expect(a.events.map(\.sequence) == Array(6...13), "what the buffer of eight holds")
    }

    @Test func eventsAreTrimmedByBytesToo() throws {
        let store = try open(.init(count: 100, bytes: 2500))
        let big = "\"" + String(repeating: "x", count: 998) + "\""  // 1000 bytes
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        for version in 1...5 {
            try commit(store, [.transaction(id: "a", transaction(version: version, events: version...version, data: big))])
        }
        try commit(store, [.snapshot(id: "a", snapshot(version: 5, last: 5))])
        store.close()
        let a = try #require(try open().loadAll().sessions.first)
        #expect(a.events.map(\.sequence) == [4, 5], "the newest events within 2,500 bytes")
    }

    @Test func aDeletedSessionLeavesNothingBehind() throws {
        let store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0)), .create(record("b"), snapshot(version: 0, last: 0)),
                           .transaction(id: "a", transaction(version: 1, events: 1...1))])
        try commit(store, [.delete(id: "a")])
        // A batch that was in flight when the session ended writes nothing.
        try commit(store, [.transaction(id: "a", transaction(version: 2, events: 2...2))])
        store.close()
        #expect(try open().loadAll().sessions.map(\.record.id) == ["b"])
        let counts = try ["navd_transactions", "navd_events"].map { table in
            try server().query("SELECT count(*) FROM \(table) WHERE session = 'a'", database: database)
        }
        #expect(counts == [["0"], ["0"]])
        #expect(try server().query("SELECT count(*) FROM navd_sessions", database: database) == ["1"])
    }

    @Test func manyConcurrentCommitsShareCommits() async throws {
        let store = try open()
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
        #expect(statistics.latencyCounts.last == statistics.commits)
        store.close()
        let sessions = try open().loadAll().sessions
        #expect(sessions.count == 64)
        #expect(sessions.allSatisfy { $0.transactions.map(\.version) == Array(1...10) })
    }

    /// One request's failed write fails only its own requests and those that depend on it.
    @Test func aWriteWhoseEarlierWriteFailedIsRefusedUnwritten() throws {
        let store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0)), .create(record("c"), snapshot(version: 0, last: 0))])
        for round in 1...5 {
            let failed = Atomic<Bool>(false)
            let results = Mutex<[String: Bool]>([:])
            let done = DispatchSemaphore(value: 0)
            func finish(_ name: String) -> @Sendable (Result<Void, StorageError>) -> Void {
                { result in
                    if name == "bad", case .failure = result { failed.store(true, ordering: .relaxed) }
                    results.withLock { $0[name] = (try? result.get()) != nil }
                    done.signal()
                }
            }
            store.commit([.create(record("a"), snapshot(version: 0, last: 0))], completion: finish("bad"))
            store.commit([.transaction(id: "a", transaction(version: round, events: round...round))],
                         admissible: { !failed.load(ordering: .relaxed) }, completion: finish("dependent"))
            store.commit([.transaction(id: "c", transaction(version: round, events: round...round))], completion: finish("neighbour"))
            for _ in 0..<3 { done.wait() }
            #expect(results.withLock { $0 } == ["bad": false, "dependent": false, "neighbour": true])
        }
        store.close()
        let sessions = try open().loadAll().sessions
        #expect(sessions.first { $0.record.id == "a" }?.transactions.isEmpty == true)
        #expect(sessions.first { $0.record.id == "c" }?.transactions.map(\.version) == Array(1...5))
    }

    /// A server that drops navd's connection (a restart, a failover) fails the batch in flight,
    /// and the next commit connects again by itself.
    @Test func aLostConnectionFailsOneBatchAndTheNextCommitReconnects() throws {
        let store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        let ended = try server().query("""
            SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
            WHERE datname = current_database() AND application_name = 'navd' AND pid <> pg_backend_pid()
            """, database: database)
        #expect(ended == ["1"])
        // The first commit may learn of the loss only when it fails; one that follows succeeds.
        let first = Result { try commit(store, [.transaction(id: "a", transaction(version: 1, events: 1...1))]) }
        if case .failure = first { try commit(store, [.transaction(id: "a", transaction(version: 1, events: 1...1))]) }
        try commit(store, [.transaction(id: "a", transaction(version: 2, events: 2...2))])
        store.close()
        let a = try #require(try open().loadAll().sessions.first)
        #expect(a.transactions.map(\.version) == [1, 2])
    }

    @Test func nodesStartingTogetherMigrateOnceAndAllOpen() async throws {
        let url = self.url
        let retention = self.retention
        let opened = await withTaskGroup(of: Bool.self) { group in
            for _ in 0..<6 {
                group.addTask {
                    guard let store = try? PostgresSessionStore(url: url, retention: retention) else { return false }
                    store.close()
                    return true
                }
            }
            return await group.reduce(0) { $0 + ($1 ? 1 : 0) }
        }
        #expect(opened == 6)
        #expect(try server().query("SELECT version FROM navd_schema", database: database) == ["\(PostgresSchema.version)"])
        // And again: a restart finds the work done.
        try open().close()
    }

    @Test func aDatabaseFromANewerNavdIsRefused() throws {
        try open().close()
        _ = try server().query("UPDATE navd_schema SET version = 99", database: database)
        #expect {
            try open()
        } throws: { error in
            "\(error)".contains("newer navd (schema 99")
        }
    }

    @Test func anUnreachableServerIsRefusedWithoutItsPassword() throws {
        #expect {
            try PostgresSessionStore(url: "postgresql://navd:s3cret@127.0.0.1:9/navd?connect_timeout=2", retention: retention)
        } throws: { error in
            let text = "\(error)"
            return text.contains("cannot open the session store") && !text.contains("s3cret")
        }
    }

    // MARK: - Helpers

    var database: String { String(url.split(separator: "/").last ?? "") }

    func server() throws -> PostgresServer { try PostgresServer.shared() }

    func commit(_ store: PostgresSessionStore, _ writes: [StoreWrite]) throws {
        let outcome = Mutex<Result<Void, StorageError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        store.commit(writes) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        try outcome.withLock { $0 }?.get()
    }
}
