import Foundation
@testable import PostgresStorage
import SessionStorage
import Synchronization
import Testing
import TestSupport

/// One owner per session on a shared PostgreSQL store: a claim raises the session's epoch and
/// fences off the node that held it, whose writes then change nothing; claims are announced to
/// every node; a claim without the token moves nothing; version 1's tables gain the epoch.
@Suite(.enabled(if: PostgresServer.isAvailable, "no PostgreSQL server could be started here (initdb/pg_ctl missing, or no user to run it as)"))
struct PostgresOwnershipTests {
    let url: String
    let retention = PostgresSessionStore.EventRetention(count: 8, bytes: 1 << 20)
    static let id = "0123456789abcdef0123456789abcdef"
    static let token = "token-of-the-session"

    init() throws {
        url = try PostgresServer.freshDatabase()
    }

    func open() throws -> PostgresSessionStore {
        try PostgresSessionStore(url: url, retention: retention)
    }

    func create(_ store: PostgresSessionStore, _ id: String = Self.id) throws {
        let record = SessionRecord(id: id, tokenHash: TokenHash.sha256(Array(Self.token.utf8)), feature: "counter", created: 1)
        let snapshot = SessionSnapshot(version: 0, lastSequence: 0, nextSerial: 1, state: Array(#"{"count":0}"#.utf8), tree: Array(#"{"id":"root"}"#.utf8))
        #expect(try commit(store, [.create(record, snapshot)]) == nil)
    }

    func step(_ version: Int, epoch: Int, id: String = Self.id) -> [StoreWrite] {
        [.fence(id: id, epoch: epoch), .transaction(id: id, SessionTransaction(
            version: version, lastSequence: version, nextSerial: 1,
            statePatch: Array(#"[{"op":"replace","path":"/count","value":\#(version)}]"#.utf8),
            events: [StoredEvent(sequence: version, kind: "state", data: Array(#"{"count":\#(version)}"#.utf8))]))]
    }

    @Test func aClaimFencesOffThePreviousOwnerWhoseWritesChangeNothing() throws {
        let first = try open()
        let second = try open()
        defer {
            first.close()
            second.close()
        }
        try create(first)
        #expect(try commit(first, step(1, epoch: SessionEpoch.created)) == nil, "the creator owns it")

        let (stored, epoch) = try #require(claimed(try claim(second)))
        #expect(epoch == SessionEpoch.created + 1)
        #expect(stored.transactions.map(\.version) == [1], "the claim reads what the previous owner committed")
        #expect(stored.events.map(\.sequence) == [1])

        #expect(try commit(first, step(2, epoch: SessionEpoch.created)) == .fenced(Self.id), "the old epoch no longer holds")
        #expect(try commit(second, step(2, epoch: epoch)) == nil)
        #expect(try commit(first, step(3, epoch: SessionEpoch.created)) == .fenced(Self.id), "and never will again")
        #expect(try query("SELECT string_agg(version::text, ',' ORDER BY ordinal) FROM navd_transactions") == ["1,2"],
                "only the owner of the moment ever wrote")
        #expect(try query("SELECT epoch FROM navd_sessions") == ["\(epoch)"])

        // A fenced delete deletes nothing.
        #expect(try commit(first, [.fence(id: Self.id, epoch: SessionEpoch.created), .delete(id: Self.id)]) == .fenced(Self.id))
        #expect(try query("SELECT count(*) FROM navd_sessions") == ["1"])
    }

    @Test func aFencedRequestFailsAloneAndItsNeighboursCommit() async throws {
        let store = try open()
        defer { store.close() }
        let other = "fedcba9876543210fedcba9876543210"
        try create(store)
        try create(store, other)
        // Handed over together, so they share one transaction.
        let results = await withTaskGroup(of: (String, StorageError?).self) { group in
            for (id, epoch) in [(Self.id, 7), (other, SessionEpoch.created)] {
                group.addTask {
                    await withCheckedContinuation { done in
                        store.commit(self.step(1, epoch: epoch, id: id)) { result in
                            if case .failure(let error) = result { done.resume(returning: (id, error)) } else { done.resume(returning: (id, nil)) }
                        }
                    }
                }
            }
            return await group.reduce(into: [String: StorageError?]()) { $0[$1.0] = $1.1 }
        }
        #expect(results[Self.id] == .some(.fenced(Self.id)))
        #expect(results[other] == .some(nil))
        #expect(try query("SELECT session FROM navd_transactions") == [other])
        #expect(store.statistics().failedCommits == 0, "a fence that did not hold is no failure of the store")
    }

    @Test func aClaimWithoutTheTokenMovesNothingAndAnUnknownSessionIsNotFound() throws {
        let store = try open()
        defer { store.close() }
        try create(store)
        #expect(try claim(store, token: "wrong").isRefused)
        #expect(try query("SELECT epoch FROM navd_sessions") == ["\(SessionEpoch.created)"])
        #expect(try claim(store, id: "ffffffffffffffffffffffffffffffff").isNotFound)
    }

    @Test func everyNodeHearsOfClaimsAndDeletions() async throws {
        let watcher = try open()
        let claimer = try open()
        defer {
            watcher.close()
            claimer.close()
        }
        let heard = Mutex<[String]>([])
        watcher.onTakeover { id, epoch in heard.withLock { $0.append("\(id) \(epoch)") } }
        // The listener connects on its own queue; a claim before it listens is not heard.
        let database = database
        #expect(await eventually {
            (try? PostgresServer.shared().query("SELECT count(*) FROM pg_stat_activity WHERE datname = '\(database)' AND query LIKE 'LISTEN%'",
                                                 database: database)) == ["1"]
        })
        try create(claimer)
        _ = try claim(claimer)
        #expect(try commit(claimer, [.fence(id: Self.id, epoch: 2), .delete(id: Self.id)]) == nil)
        #expect(await eventually { heard.withLock { $0 }.count == 2 })
        #expect(heard.withLock { $0 } == ["\(Self.id) 2", "\(Self.id) \(SessionEpoch.deleted)"])
    }

    @Test func aVersionOneDatabaseGainsTheEpochColumn() throws {
        try open().close()
        _ = try query("ALTER TABLE navd_sessions DROP COLUMN epoch")
        _ = try query("UPDATE navd_schema SET version = 1")
        _ = try query("""
            INSERT INTO navd_sessions (id, token_hash, feature, created, version, last_sequence, next_serial, state, tree, extras)
            VALUES ('\(Self.id)', '\\x00', 'counter', 1, 0, 0, 1, '\\x7b7d', '\\x7b7d', '\\x7b7d')
            """)
        try open().close()
        #expect(try query("SELECT version FROM navd_schema") == ["\(PostgresSchema.version)"])
        #expect(try query("SELECT epoch FROM navd_sessions") == ["\(SessionEpoch.created)"], "existing rows belong to whoever created them")
    }

    // MARK: - Helpers

    var database: String { String(url.split(separator: "/").last ?? "") }

    func query(_ sql: String) throws -> [String] { try PostgresServer.shared().query(sql, database: database) }

    /// The commit's error, nil when it was written.
    func commit(_ store: PostgresSessionStore, _ writes: [StoreWrite]) throws -> StorageError? {
        let outcome = Mutex<StorageError?>(nil)
        let done = DispatchSemaphore(value: 0)
        store.commit(writes) { result in
            if case .failure(let error) = result { outcome.withLock { $0 = error } }
            done.signal()
        }
        done.wait()
        return outcome.withLock { $0 }
    }

    func claim(_ store: PostgresSessionStore, id: String = Self.id, token: String = Self.token) throws -> SessionClaim {
        let outcome = Mutex<Result<SessionClaim, StorageError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        store.claim(id, authorize: { TokenHash.matches(token, $0) }) { result in
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try #require(outcome.withLock { $0 }).get()
    }

    func claimed(_ claim: SessionClaim) -> (StoredSession, Int)? {
        if case .claimed(let stored, let epoch) = claim { return (stored, epoch) }
        return nil
    }
}

extension SessionClaim {
    var isRefused: Bool {
        if case .refused = self { return true }
        return false
    }

    var isNotFound: Bool {
        if case .notFound = self { return true }
        return false
    }
}
