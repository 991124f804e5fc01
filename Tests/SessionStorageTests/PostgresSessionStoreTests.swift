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

    /// The scenarios every engine owes the server, on this suite's database.
    var contract: StoreContract { StoreContract { try open($0) } }

    @Test func whatIsCommittedComesBackOnANewConnection() throws {
        try contract.whatIsCommittedComesBack()
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

    /// A row with an empty id, which paging by id cannot reach (another program's edit), is
    /// reported, not passed over; a bad token hash fails only its own session.
    @Test func rowsThatCannotBeReadAreReportedAndTheRestLoad() throws {
        let store = try open()
        try commit(store, ["good", "bad", "blank"].map { .create(record($0), snapshot(version: 0, last: 0)) })
        store.close()
        _ = try server().query("UPDATE navd_sessions SET token_hash = '\\x00' WHERE id = 'bad'", database: database)
        _ = try server().query("UPDATE navd_sessions SET id = '' WHERE id = 'blank'", database: database)
        var seen: [String] = []
        let failed = try open().load { seen.append($0.record.id) }
        #expect(seen == ["good"])
        #expect(failed == ["bad", "(a session without an id)"])
    }

    @Test func aSnapshotDropsTheTransactionsItCoversAndTrimsEventsToTheBuffer() throws {
        try contract.aSnapshotDropsTheTransactionsItCovers()
        #expect(try server().query("SELECT count(*) FROM navd_events WHERE session = 'a'", database: database) == ["9"],
                "eight kept at the snapshot (5…12), then 13")
    }

    @Test func eventsAreTrimmedByBytesToo() throws {
        try contract.eventsAreTrimmedByBytes(.init(count: 100, bytes: 2500))
    }

    /// A start reads back what memory has room for: every state and every event a session
    /// replays, then the other kept events newest first, a round of sessions at a time.
    @Test func aStartReadsKeptEventsOnlyAsFarAsMemoryHasRoom() throws {
        let retention = EventRetention(count: 100, bytes: 1 << 20)
        let store = try open(retention)
        let big = "\"" + String(repeating: "x", count: 998) + "\""  // 1000 bytes
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0)), .create(record("b"), snapshot(version: 0, last: 0))])
        func both(_ version: Int) -> [StoreWrite] {
            [.transaction(id: "a", transaction(version: version, events: version...version, data: big)),
             .transaction(id: "b", transaction(version: version, events: version...version, data: big))]
        }
        for version in 1...5 { try commit(store, both(version)) }
        // Both snapshots cover 1…5, which are only kept; 6 is replayed.
        try commit(store, [.snapshot(id: "a", snapshot(version: 5, last: 5)), .snapshot(id: "b", snapshot(version: 5, last: 5))])
        try commit(store, both(6))
        store.close()

        func load(within memory: Int) throws -> [String: StoredSession] {
            let store = try open(retention)
            defer { store.close() }
            var loaded: [String: StoredSession] = [:]
            let failed = try store.load(within: memory, perSession: 100) { loaded[$0.record.id] = $0 }
            #expect(failed.isEmpty)
            return loaded
        }
        let all = try load(within: .max)
        #expect(all.mapValues { $0.events.map(\.sequence) } == ["a": Array(1...6), "b": Array(1...6)])
        let states = all.values.reduce(0) { $0 + $1.snapshot.state.count + 100 }
        func kept(room: Int) throws -> [String: [Int]] {
            let loaded = try load(within: states + room)
            for session in loaded.values {
                #expect(session.transactions.map { $0.events.map(\.sequence) } == [[6]], "what it replays, whole")
            }
            return loaded.mapValues { $0.events.map(\.sequence) }
        }
        // The replayed a6 and b6, then a5 and b5, then a4: room for five events, not a sixth.
        #expect(try kept(room: 5_500) == ["a": [4, 5, 6], "b": [5, 6]])
        // No room at all: what is replayed comes back regardless.
        #expect(try kept(room: 0) == ["a": [6], "b": [6]])
        #expect(try kept(room: 1 << 30) == ["a": Array(1...6), "b": Array(1...6)])
        #expect(try load(within: .max).mapValues(\.events) == all.mapValues(\.events), "what was not read is still in the database")
    }

    @Test func aDeletedSessionLeavesNothingBehind() throws {
        try contract.aDeletedSessionIsGone()
        let counts = try ["navd_transactions", "navd_events"].map { table in
            try server().query("SELECT count(*) FROM \(table) WHERE session = 'a'", database: database)
        }
        #expect(counts == [["0"], ["0"]])
        #expect(try server().query("SELECT count(*) FROM navd_sessions", database: database) == ["1"])
    }

    @Test func manyConcurrentCommitsShareCommits() async throws {
        _ = try await contract.concurrentCommitsShareCommits()
    }

    @Test func aWriteWhoseEarlierWriteFailedIsRefusedUnwritten() throws {
        try contract.aWriteWhoseEarlierWriteFailedIsRefusedUnwritten(rounds: 5)
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
}
