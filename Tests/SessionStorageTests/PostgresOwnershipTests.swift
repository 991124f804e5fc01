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
    let retention = EventRetention(count: 8, bytes: 1 << 20)
    static let id = "0123456789abcdef0123456789abcdef"
    static let token = "token-of-the-session"

    // Everything that blocks (createdb, psql, libpq's connect) runs off the cooperative pool.
    static func freshDatabase() async throws -> String {
        try await offThePool { try PostgresServer.freshDatabase() }
    }

    func open(_ url: String) async throws -> PostgresSessionStore {
        let retention = retention
        return try await offThePool { try PostgresSessionStore(url: url, retention: retention) }
    }

    func create(_ store: PostgresSessionStore, _ id: String = Self.id) async {
        let record = SessionRecord(id: id, tokenHash: TokenHash.sha256(Array(Self.token.utf8)), feature: "counter", created: 1)
        let snapshot = SessionSnapshot(version: 0, lastSequence: 0, nextSerial: 1, state: Array(#"{"count":0}"#.utf8), tree: Array(#"{"id":"root"}"#.utf8))
        #expect(await commit(store, [.create(record, snapshot)]) == nil)
    }

    func step(_ version: Int, epoch: Int, id: String = Self.id) -> [StoreWrite] {
        [.fence(id: id, epoch: epoch), .transaction(id: id, SessionTransaction(
            version: version, lastSequence: version, nextSerial: 1,
            statePatch: Array(#"[{"op":"replace","path":"/count","value":\#(version)}]"#.utf8),
            events: [StoredEvent(sequence: version, kind: "state", data: Array(#"{"count":\#(version)}"#.utf8))]))]
    }

    @Test func aClaimFencesOffThePreviousOwnerWhoseWritesChangeNothing() async throws {
        let (url, first, second) = try await twoNodesAndASessionOfTheFirst()
        defer {
            first.close()
            second.close()
        }
        #expect(await commit(first, step(1, epoch: SessionEpoch.created)) == nil, "the creator owns it")

        let (stored, epoch) = try #require(claimed(try await claim(second)))
        #expect(epoch == SessionEpoch.created + 1)
        #expect(stored.transactions.map(\.version) == [1], "the claim reads what the previous owner committed")
        #expect(stored.events.map(\.sequence) == [1])

        #expect(await commit(first, step(2, epoch: SessionEpoch.created)) == .fenced(Self.id), "the old epoch no longer holds")
        #expect(await commit(second, step(2, epoch: epoch)) == nil)
        #expect(await commit(first, step(3, epoch: SessionEpoch.created)) == .fenced(Self.id), "and never will again")
        #expect(try await query(url, "SELECT string_agg(version::text, ',' ORDER BY ordinal) FROM navd_transactions") == ["1,2"],
                "only the owner of the moment ever wrote")
        #expect(try await query(url, "SELECT epoch FROM navd_sessions") == ["\(epoch)"])

        // A fenced delete deletes nothing.
        #expect(await commit(first, [.fence(id: Self.id, epoch: SessionEpoch.created), .delete(id: Self.id)]) == .fenced(Self.id))
        #expect(try await query(url, "SELECT count(*) FROM navd_sessions") == ["1"])
    }

    @Test func aFencedRequestFailsAloneAndItsNeighboursCommit() async throws {
        let url = try await Self.freshDatabase()
        let store = try await open(url)
        defer { store.close() }
        let other = "fedcba9876543210fedcba9876543210"
        await create(store)
        await create(store, other)
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
        #expect(try await query(url, "SELECT session FROM navd_transactions") == [other])
        #expect(store.statistics().failedCommits == 0, "a fence that did not hold is no failure of the store")
    }

    @Test func aClaimWithoutTheTokenMovesNothingAndAnUnknownSessionIsNotFound() async throws {
        let url = try await Self.freshDatabase()
        let store = try await open(url)
        defer { store.close() }
        await create(store)
        #expect(try await claim(store, token: "wrong").isRefused)
        #expect(try await query(url, "SELECT epoch FROM navd_sessions") == ["\(SessionEpoch.created)"])
        #expect(try await claim(store, id: "ffffffffffffffffffffffffffffffff").isNotFound)
    }

    @Test func everyNodeHearsOfClaimsAndDeletions() async throws {
        let url = try await Self.freshDatabase()
        let watcher = try await open(url)
        let claimer = try await open(url)
        defer {
            watcher.close()
            claimer.close()
        }
        let heard = listen(watcher)
        // The listener connects on its own queue; a claim before it listens is not heard.
        #expect(try await listenerPID(url) != nil)
        await create(claimer)
        _ = try await claim(claimer)
        #expect(await commit(claimer, [.fence(id: Self.id, epoch: 2), .delete(id: Self.id)]) == nil)
        #expect(await eventually { heard.all.count == 2 })
        #expect(heard.all == ["\(Self.id) 2", "\(Self.id) \(SessionEpoch.deleted)"])
    }

    /// A node deletes a session another node holds without taking it over: the token is
    /// checked on the row first (a wrong one changes and announces nothing), and the holder
    /// hears a deletion, never a claim.
    @Test func aDeletionByAnotherNodeChecksTheTokenAndIsAnnouncedAsOne() async throws {
        let url = try await Self.freshDatabase()
        let holder = try await open(url)
        let deleter = try await open(url)
        defer {
            holder.close()
            deleter.close()
        }
        let heard = listen(holder)
        #expect(try await listenerPID(url) != nil)
        await create(holder)
        #expect(await commit(holder, step(1, epoch: SessionEpoch.created)) == nil)
        #expect(try await delete(deleter, token: "not-the-token") == .refused)
        #expect(try await delete(deleter, id: Self.otherID) == .notFound)
        #expect(try await query(url, "SELECT epoch FROM navd_sessions") == ["\(SessionEpoch.created)"], "a refusal moves nothing")
        #expect(try await delete(deleter) == .deleted)
        #expect(await eventually { heard.all == ["\(Self.id) \(SessionEpoch.deleted)"] })
        for table in ["navd_sessions", "navd_transactions", "navd_events"] {
            #expect(try await query(url, "SELECT count(*) FROM \(table)") == ["0"], "\(table) keeps a deleted session")
        }
        #expect(await commit(holder, step(2, epoch: SessionEpoch.created)) == .deleted(Self.id),
                "the holder writes it no more, and learns it is deleted, not taken over")
        #expect(try await delete(deleter) == .notFound)
    }

    /// Announcements made while a node's listening connection was down reach it once it is
    /// back: the current epoch of each session it holds, deleted or expired for those that are
    /// gone, as the announcement said.
    @Test func aListenerThatLostItsConnectionCatchesUpOnWhatItMissed() async throws {
        let url = try await Self.freshDatabase()
        let holder = try await open(url)
        let other = try await open(url)
        defer {
            holder.close()
            other.close()
        }
        let kept = "1" + Self.id.dropFirst()
        let idle = "2" + Self.id.dropFirst()
        for id in [Self.id, Self.otherID, kept, idle] { await create(holder, id) }
        let heard = listen(holder, holding: [Self.id, Self.otherID, kept, idle])
        let first = try #require(try await listenerPID(url))
        _ = try await query(url, "SELECT pg_terminate_backend(\(first))")
        var gone = false
        for _ in 0..<100 where !gone {
            gone = try await query(url, "SELECT count(*) FROM pg_stat_activity WHERE pid = \(first)") == ["0"]
            if !gone { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(gone)

        // Neither is heard as it happens: the holder listens again only a second later.
        _ = try await claim(other)
        #expect(await commit(other, [.fence(id: Self.otherID, epoch: SessionEpoch.created), .delete(id: Self.otherID)]) == nil)
        _ = try await query(url, "UPDATE navd_sessions SET last_active = last_active - 120 WHERE id = '\(idle)'")
        #expect(try await sweep(other, inUse: [], idle: .seconds(60)) == [idle])
        let missed = ["\(Self.id) 2", "\(Self.otherID) \(SessionEpoch.deleted)", "\(idle) \(SessionEpoch.expired)"]
        #expect(await eventually(within: .seconds(5)) { Set(missed).isSubset(of: heard.all) })
        #expect(heard.all.filter { $0.hasPrefix(kept) }.allSatisfy { $0 == "\(kept) \(SessionEpoch.created)" },
                "the session nobody touched is still the holder's")
        let again = try #require(try await listenerPID(url), "listening again")
        #expect(again != first)
    }

    /// Each sweep marks the sessions a node used and deletes, with their transactions and
    /// events, those no node used for the idle time, announcing each deletion.
    @Test func aSweepExpiresWhatNoNodeUsedAndKeepsWhatANodeUses() async throws {
        let url = try await Self.freshDatabase()
        let store = try await open(url)
        let watcher = try await open(url)
        defer {
            store.close()
            watcher.close()
        }
        let heard = listen(watcher)
        #expect(try await listenerPID(url) != nil)
        for id in [Self.id, Self.otherID] {
            await create(store, id)
            #expect(await commit(store, step(1, epoch: SessionEpoch.created, id: id)) == nil)
        }
        // Both last used two minutes ago; one of them is in use on some node now.
        _ = try await query(url, "UPDATE navd_sessions SET last_active = last_active - 120")
        #expect(try await sweep(store, inUse: [], idle: .seconds(300)) == [], "not idle for long enough")
        #expect(try await sweep(store, inUse: [Self.otherID], idle: nil) == [], "a node without a TTL only records")
        #expect(try await query(url, "SELECT id FROM navd_sessions WHERE last_active > extract(epoch from now())::float8 - 60") == [Self.otherID])
        _ = try await query(url, "UPDATE navd_sessions SET last_active = last_active - 120 WHERE id = '\(Self.otherID)'")
        #expect(try await sweep(store, inUse: [Self.id], idle: .seconds(60)) == [Self.otherID])
        #expect(try await query(url, "SELECT id FROM navd_sessions") == [Self.id])
        #expect(try await query(url, "SELECT DISTINCT session FROM navd_transactions") == [Self.id])
        #expect(try await query(url, "SELECT DISTINCT session FROM navd_events") == [Self.id])
        #expect(await eventually { heard.all == ["\(Self.otherID) \(SessionEpoch.expired)"] }, "announced as expired, not deleted")
        #expect(await commit(store, step(2, epoch: SessionEpoch.created, id: Self.otherID)) == .expired(Self.otherID),
                "its holder's next write is told it expired, for a holder that did not hear")
        #expect(await commit(store, [.fence(id: Self.unknownID, epoch: SessionEpoch.created), .delete(id: Self.unknownID)]) == .deleted(Self.unknownID),
                "a session no sweep took was deleted")
        // Marked as used by that sweep: not idle now, until it is.
        #expect(try await sweep(store, inUse: [], idle: .seconds(60)) == [])
        _ = try await query(url, "UPDATE navd_sessions SET last_active = last_active - 120")
        #expect(try await sweep(store, inUse: [], idle: .seconds(60)) == [Self.id])
        #expect(try await query(url, "SELECT count(*) FROM navd_sessions") == ["0"])
        // Expiries are remembered for a day, then forgotten by a later sweep (one with a TTL).
        #expect(try await query(url, "SELECT id FROM navd_expired ORDER BY id") == [Self.id, Self.otherID].sorted())
        _ = try await query(url, "UPDATE navd_expired SET at = at - \(PostgresSchema.expiryMemory + 60) WHERE id = '\(Self.otherID)'")
        #expect(try await sweep(store, inUse: [], idle: .seconds(60)) == [])
        #expect(try await query(url, "SELECT id FROM navd_expired") == [Self.id])
    }

    @Test func aVersionOneDatabaseGainsTheEpochColumn() async throws {
        let url = try await Self.freshDatabase()
        try await open(url).close()
        _ = try await query(url, "ALTER TABLE navd_sessions DROP COLUMN epoch")
        _ = try await query(url, "UPDATE navd_schema SET version = 1")
        _ = try await query(url, """
            INSERT INTO navd_sessions (id, token_hash, feature, created, version, last_sequence, next_serial, state, tree, extras)
            VALUES ('\(Self.id)', '\\x00', 'counter', 1, 0, 0, 1, '\\x7b7d', '\\x7b7d', '\\x7b7d')
            """)
        try await open(url).close()
        #expect(try await query(url, "SELECT version FROM navd_schema") == ["\(PostgresSchema.version)"])
        #expect(try await query(url, "SELECT epoch FROM navd_sessions") == ["\(SessionEpoch.created)"], "existing rows belong to whoever created them")
        #expect(try await query(url, "SELECT count(*) FROM navd_sessions WHERE abs(last_active - extract(epoch from now())::float8) < 60") == ["1"],
                "and count as used at the migration")
    }

    // MARK: - Helpers

    /// What `store` hears announced, holding `held`.
    func listen(_ store: PostgresSessionStore, holding held: [String] = []) -> Announcements {
        let heard = Announcements()
        store.onTakeover(held: { held }) { heard.append("\($0) \($1)") }
        return heard
    }

    static let otherID = "fedcba9876543210fedcba9876543210"
    static let unknownID = "00000000000000000000000000000000"

    /// The backend of the store's listening connection, once there is one (nil after 5 s).
    func listenerPID(_ url: String) async throws -> String? {
        for _ in 0..<100 {
            let found = try await query(url, """
                SELECT pid FROM pg_stat_activity WHERE datname = current_database()
                    AND (query LIKE 'LISTEN%' OR query LIKE '/* navd listener catch-up */%')
                """)
            if let pid = found.first, !pid.isEmpty { return pid }
            try await Task.sleep(for: .milliseconds(50))
        }
        return nil
    }

    func sweep(_ store: PostgresSessionStore, inUse: [String], idle: Duration?) async throws -> [String] {
        try await withCheckedContinuation { done in
            store.sweep(inUse: inUse, idle: idle) { done.resume(returning: $0) }
        }.get().sorted()
    }

    /// A node that cannot bring a session back (a feature it lacks, a state over its bounds)
    /// moves nothing: the epoch stays, the holder keeps writing, and the claim says so.
    @Test func aClaimThatCannotBeRestoredLeavesTheSessionWithItsHolder() async throws {
        let (url, first, second) = try await twoNodesAndASessionOfTheFirst()
        defer {
            first.close()
            second.close()
        }
        let offered = Mutex<[Int]>([])
        let refused = try await claim(second, restore: { _, epoch in
            offered.withLock { $0.append(epoch) }
            return false
        })
        #expect(refused.isUnreadable)
        #expect(offered.withLock { $0 } == [SessionEpoch.created + 1], "asked with the epoch the claim would take")
        #expect(try await query(url, "SELECT epoch FROM navd_sessions") == ["\(SessionEpoch.created)"], "the epoch did not move")
        #expect(await commit(first, step(1, epoch: SessionEpoch.created)) == nil, "the holder still holds it")
        let (_, epoch) = try #require(claimed(try await claim(second)))
        #expect(epoch == SessionEpoch.created + 1, "a node that can restore it takes it as before")
    }

    /// A restarted server ends every connection, and libpq learns it only when one is next used:
    /// the first claim after it opens the connection again and succeeds, rather than failing once.
    @Test func theFirstClaimAfterTheServerDroppedTheConnectionSucceeds() async throws {
        let (url, first, second) = try await twoNodesAndASessionOfTheFirst()
        defer {
            first.close()
            second.close()
        }
        _ = try #require(claimed(try await claim(second)), "the claiming connection is open")
        let ended = try await query(url, """
            SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
            WHERE datname = current_database() AND application_name = 'navd'
            """)
        #expect(ended != ["0"], "navd's connections were ended")
        let (_, epoch) = try #require(claimed(try await claim(second)), "claimed at the first try")
        #expect(epoch == SessionEpoch.created + 2)
    }

    /// The same for the store's writer: the first commit after a restart is written, not
    /// refused with every session of its batch rolled back.
    @Test func theFirstCommitAfterTheServerDroppedTheConnectionSucceeds() async throws {
        let (url, first, second) = try await twoNodesAndASessionOfTheFirst()
        defer {
            first.close()
            second.close()
        }
        #expect(try await query(url, """
            SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
            WHERE datname = current_database() AND application_name = 'navd'
            """) != ["0"], "navd's connections were ended")
        #expect(await commit(first, step(1, epoch: SessionEpoch.created)) == nil, "written at the first try")
        #expect(try await query(url, "SELECT max(version) FROM navd_transactions") == ["1"])
    }

    /// A commit whose reply is lost with its connection (the server committed; the answer never
    /// came) is reported as written, since it was: the server is asked after reconnecting.
    @Test func aCommitWhoseReplyWasLostIsReportedAsWritten() async throws {
        let (url, proxy, store) = try await aSessionThroughACuttingProxy()
        defer {
            store.close()
            proxy.stop()
        }
        proxy.arm(.afterTheServer)
        #expect(await commit(store, step(1, epoch: SessionEpoch.created)) == nil, "reported as the commit it was")
        #expect(proxy.cutCount == 1, "the reply was cut off")
        #expect(try await query(url, "SELECT string_agg(version::text, ',') FROM navd_transactions") == ["1"], "stored once")
        #expect(await commit(store, step(2, epoch: SessionEpoch.created)) == nil, "and the store goes on")
    }

    /// The same for a deletion: reported as the deletion it was, not as a failure.
    @Test func aDeletionWhoseReplyWasLostIsReportedAsDone() async throws {
        let (url, proxy, store) = try await aSessionThroughACuttingProxy()
        defer {
            store.close()
            proxy.stop()
        }
        proxy.arm(.afterTheServer)
        #expect(try await delete(store) == .deleted)
        #expect(proxy.cutCount == 1, "the reply was cut off")
        #expect(try await query(url, "SELECT count(*) FROM navd_sessions") == ["0"])
    }

    /// A claim whose `COMMIT` never reached the server committed nothing; the server says the
    /// transaction aborted, and the claim is made once more rather than answered 503.
    @Test func aClaimWhoseCommitNeverReachedTheServerIsMadeAgain() async throws {
        let (url, proxy, store) = try await aSessionThroughACuttingProxy()
        defer {
            store.close()
            proxy.stop()
        }
        proxy.arm(.beforeTheServer)
        let (_, epoch) = try #require(claimed(try await claim(store)), "claimed at the first try")
        #expect(proxy.cutCount == 1, "the commit was cut off")
        #expect(epoch == SessionEpoch.created + 1)
        #expect(try await query(url, "SELECT epoch FROM navd_sessions") == ["\(SessionEpoch.created + 1)"], "raised once")
    }

    /// A commit cut off whose server cannot be asked afterwards may be stored or not: it is
    /// reported as of unknown outcome, never as a failure that changed nothing (which its caller
    /// would be free to write again).
    @Test func aLostCommitWhoseServerCannotBeAskedIsOfUnknownOutcome() async throws {
        let (url, proxy, store) = try await aSessionThroughACuttingProxy()
        defer {
            store.close()
            proxy.stop()
        }
        proxy.arm(.afterTheServer)
        proxy.refuseConnections(true)
        let error = await commit(store, step(1, epoch: SessionEpoch.created))
        #expect(error.map { if case .outcomeUnknown = $0 { true } else { false } } == true, "\(String(describing: error))")
        #expect(try await query(url, "SELECT count(*) FROM navd_transactions") == ["1"], "it was stored all the same")
        proxy.refuseConnections(false)
        #expect(await commit(store, step(2, epoch: SessionEpoch.created)) == nil, "the store goes on once the server answers")
    }

    /// A commit cut off while the server is still committing it (a flush that takes long, a
    /// synchronous standby that does not answer) is not guessed at: its lane stays locked, and
    /// once the lock wait gives up (`lockTimeout`) the outcome is unknown, in seconds, not for
    /// as long as the commit takes. Here a deferred trigger holds the commit for 30 s.
    @Test func aLostCommitStillInProgressIsOfUnknownOutcome() async throws {
        let url = try await Self.freshDatabase()
        _ = try await query(url, PostgresSchema.create)
        _ = try await query(url, """
            CREATE TABLE slow (n int);
            CREATE FUNCTION sleep() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN PERFORM pg_sleep(30); RETURN NULL; END $$;
            CREATE CONSTRAINT TRIGGER sleep AFTER INSERT ON slow DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION sleep();
            """)
        let proxy = try PostgresFaultProxy(to: try PostgresServer.shared().port)
        defer { proxy.stop() }
        let proxied = proxy.url(database: String(url.split(separator: "/").last ?? ""))
        proxy.arm(.afterTheServer)
        let started = ContinuousClock.now
        let outcome = try await offThePool { () throws -> String in
            let connection = try PostgresConnection(url: proxied)
            do throws(PostgresConnection.Failure) {
                try connection.transaction { () throws(PostgresConnection.Failure) in
                    try connection.execute("INSERT INTO slow VALUES (1)")
                }
                return "committed"
            } catch {
                return error.outcomeUnknown ? "unknown" : "failed: \(error)"
            }
        }
        #expect(proxy.cutCount == 1, "the commit was cut off")
        #expect(outcome == "unknown")
        #expect(ContinuousClock.now - started < .seconds(15), "without waiting for the slow commit")
    }

    /// A commit still finishing when the new connection asks is waited for: committed, it is
    /// reported as written; failed at the last moment (a deferred check), it is run once more.
    /// Here a deferred trigger holds the commit half a second, then lets it through or fails it
    /// the first time.
    @Test(arguments: [false, true])
    func aLostCommitStillFinishingIsWaitedFor(failsTheFirstTime: Bool) async throws {
        let url = try await Self.freshDatabase()
        _ = try await query(url, PostgresSchema.create)
        _ = try await query(url, """
            CREATE TABLE late (n int); CREATE SEQUENCE calls;
            CREATE FUNCTION late() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN
                PERFORM pg_sleep(0.5);
                IF \(failsTheFirstTime) AND nextval('calls') = 1 THEN RAISE EXCEPTION 'refused at commit'; END IF;
                RETURN NULL; END $$;
            CREATE CONSTRAINT TRIGGER late AFTER INSERT ON late DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION late();
            """)
        let proxy = try PostgresFaultProxy(to: try PostgresServer.shared().port)
        defer { proxy.stop() }
        let proxied = proxy.url(database: String(url.split(separator: "/").last ?? ""))
        proxy.arm(.afterTheServer)
        let runs = try await offThePool { () throws -> Int in
            let connection = try PostgresConnection(url: proxied)
            var runs = 0
            try connection.transaction { () throws(PostgresConnection.Failure) in
                runs += 1
                try connection.execute("INSERT INTO late VALUES (\(runs))")
            }
            return runs
        }
        #expect(proxy.cutCount == 1, "the commit was cut off")
        #expect(runs == (failsTheFirstTime ? 2 : 1))
        #expect(try await query(url, "SELECT string_agg(n::text, ',') FROM late") == [failsTheFirstTime ? "2" : "1"], "stored once")
    }

    /// With a synchronous standby, a commit waits for its confirmation. When that wait is
    /// cancelled (here by an administrator), the server keeps the commit without the standby's
    /// copy and says so only in a warning: not the durability the server was set up for, nor a
    /// rollback. Its outcome is unknown, not "committed".
    @Test func aCommitWhoseStandbyWaitWasCancelledIsOfUnknownOutcome() async throws {
        let server = try await offThePool { try PostgresServer.ownServer() }
        defer { server.stop() }
        let url = server.url(database: "postgres")
        _ = try server.query(PostgresSchema.create, database: "postgres")
        _ = try server.query("CREATE TABLE unconfirmed (n int)", database: "postgres")
        let connection = try await offThePool { () throws -> LostConnection in
            let connection = try PostgresConnection(url: url)
            // Its lane is made before the standby is waited for.
            try connection.transaction { () throws(PostgresConnection.Failure) in try connection.execute("SELECT 1") }
            return LostConnection(connection: connection)
        }
        _ = try server.query("ALTER SYSTEM SET synchronous_standby_names = 'nobody'", database: "postgres")
        _ = try server.query("SELECT pg_reload_conf()", database: "postgres")
        async let outcome = offThePool { () throws -> String in
            let connection = connection.connection
            while (try? connection.integer("SELECT (current_setting('synchronous_standby_names') = 'nobody')::int::bigint")) != 1 {
                usleep(20_000)
            }
            do throws(PostgresConnection.Failure) {
                try connection.transaction { () throws(PostgresConnection.Failure) in
                    try connection.execute("INSERT INTO unconfirmed VALUES (1)")
                }
                return "committed"
            } catch {
                return error.outcomeUnknown ? "unknown" : "failed: \(error)"
            }
        }
        var cancelled = ["0"]
        for _ in 0..<200 where cancelled == ["0"] {
            try await Task.sleep(for: .milliseconds(25))
            cancelled = try server.query("SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE wait_event = 'SyncRep'",
                                         database: "postgres")
        }
        #expect(cancelled == ["1"], "the commit waited for the standby")
        #expect(try await outcome == "unknown")
        #expect(try server.query("SELECT count(*) FROM unconfirmed", database: "postgres") == ["1"], "kept on the primary alone")
    }

    /// A server that crashed while a transaction committed hands out transaction ids again from
    /// the last one its log kept, so the lost transaction's id may name another, committed one
    /// now. The lane is not fooled: the transaction did not commit, and is run once more.
    @Test func aLostCommitIsNotTakenForAnotherTransactionAfterTheServerRestarted() async throws {
        let server = try await offThePool { try PostgresServer.ownServer() }
        defer { server.stop() }
        let url = server.url(database: "postgres")
        _ = try server.query(PostgresSchema.create, database: "postgres")
        _ = try server.query("CREATE TABLE lost (n int)", database: "postgres")

        let runs = try await offThePool { () throws -> Int in
            let connection = try PostgresConnection(url: url)
            var runs = 0
            try connection.transaction { () throws(PostgresConnection.Failure) in
                runs += 1
                let id = try connection.integer("SELECT txid_current()")
                try connection.execute("INSERT INTO lost VALUES (\(runs))")
                guard runs == 1 else { return }
                try? server.crashAndRestart()
                // Another transaction takes the lost one's id, and commits.
                if let other = try? PostgresConnection(url: url) {
                    while let taken = try? other.integer("SELECT txid_current()"), taken < id {}
                }
            }
            return runs
        }
        #expect(runs == 2, "not taken for the other transaction: run once more")
        #expect(try server.query("SELECT string_agg(n::text, ',') FROM lost", database: "postgres") == ["2"], "stored once")
    }

    /// A sweep runs on a connection of its own, which a restarted server ended too: the first
    /// sweep after it opens the connection again and is made, rather than failing once.
    @Test func theFirstSweepAfterTheServerDroppedTheConnectionSucceeds() async throws {
        let url = try await Self.freshDatabase()
        let store = try await open(url)
        defer { store.close() }
        await create(store)
        #expect(try await sweep(store, inUse: [Self.id], idle: nil) == [], "the sweeping connection is open")
        #expect(try await query(url, """
            SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
            WHERE datname = current_database() AND application_name = 'navd'
            """) != ["0"], "navd's connections were ended")
        _ = try await query(url, "UPDATE navd_sessions SET last_active = last_active - 120")
        #expect(try await sweep(store, inUse: [], idle: .seconds(60)) == [Self.id], "swept at the first try")
    }

    /// A commit that never reached the server committed nothing, which the server says once
    /// the connection is back: it is written again, at the first try, and stored once.
    @Test func aCommitThatNeverReachedTheServerIsWrittenAgainOnce() async throws {
        let (url, proxy, store) = try await aSessionThroughACuttingProxy()
        defer {
            store.close()
            proxy.stop()
        }
        proxy.arm(.beforeTheServer)
        #expect(await commit(store, step(1, epoch: SessionEpoch.created)) == nil, "written at the first try")
        #expect(proxy.cutCount == 1, "the commit was cut off")
        #expect(try await query(url, "SELECT string_agg(version::text, ',') FROM navd_transactions") == ["1"], "stored once")
    }

    /// A store that reaches a fresh database through a proxy that can cut a COMMIT, with a
    /// session it created; `url` is the database's own, without the proxy.
    func aSessionThroughACuttingProxy(answerTimeout: Duration = PostgresSessionStore.defaultAnswerTimeout) async throws
        -> (url: String, proxy: PostgresFaultProxy, store: PostgresSessionStore) {
        let url = try await Self.freshDatabase()
        let proxy = try PostgresFaultProxy(to: try PostgresServer.shared().port)
        let proxied = proxy.url(database: String(url.split(separator: "/").last ?? ""))
        let retention = retention
        let store = try await offThePool { try PostgresSessionStore(url: proxied, retention: retention, answerTimeout: answerTimeout) }
        await create(store)
        return (url, proxy, store)
    }

    /// A server that stops answering while its kernel still takes the traffic (its process
    /// stopped, its disk hung) fires neither its own timeouts nor TCP's. The store's deadline
    /// fails the commit, and the commits queued behind it fail together as soon as the
    /// connection cannot be opened again, not one by one, each waiting as long; nothing was
    /// written. Once the server answers, the next commit connects anew and is written.
    @Test func aServerThatStopsAnsweringFailsCommitsByTheDeadlineAndTheStoreGoesOnOnceItAnswers() async throws {
        let (url, proxy, store) = try await aSessionThroughACuttingProxy(answerTimeout: .milliseconds(1500))
        defer {
            store.close()
            proxy.stop()
        }
        proxy.stall(true)
        let started = ContinuousClock.now
        let first = Task { await commit(store, step(1, epoch: SessionEpoch.created)) }
        try await Task.sleep(for: .milliseconds(300))
        // Queued behind the first: committed together, in the next round.
        let queued = (2...4).map { version in Task { await commit(store, step(version, epoch: SessionEpoch.created)) } }
        let firstError = await first.value
        let firstTook = ContinuousClock.now - started
        var queuedErrors: [StorageError?] = []
        for task in queued { queuedErrors.append(await task.value) }
        let allTook = ContinuousClock.now - started
        #expect(firstError.map { if case .unreachable = $0 { true } else { false } } == true, "\(String(describing: firstError))")
        #expect(firstTook >= .milliseconds(1400) && firstTook < .seconds(5), "failed at its deadline, without a second try: \(firstTook)")
        #expect(queuedErrors.allSatisfy { $0 != nil }, "\(queuedErrors)")
        // A reconnection through the stalled proxy waits for libpq's 5 s connect timeout once;
        // tried request by request, it would wait that long for each of the three.
        #expect(allTook < .seconds(12), "the queued commits failed together: \(allTook)")

        proxy.stall(false)
        #expect(await commit(store, step(1, epoch: SessionEpoch.created)) == nil, "written once the server answers")
        #expect(try await query(url, "SELECT string_agg(version::text, ',') FROM navd_transactions") == ["1"], "and nothing before it")
    }

    /// The store's own waits work over TLS (`sslmode=require`): a session far larger than a TLS
    /// record is claimed whole and at once, never left waiting for the deadline. (The wait also
    /// looks at what OpenSSL holds decrypted, as libpq's own waits do; this libpq was not seen to
    /// leave anything there.)
    @Test func aLargeSessionIsClaimedOverTLSWithoutWaitingForTheDeadline() async throws {
        let server = try await offThePool { try PostgresServer.ownServer(tls: true) }
        defer { server.stop() }
        let url = server.url(database: "postgres") + "?sslmode=require"
        let retention = retention
        let first = try await offThePool { try PostgresSessionStore(url: url, retention: retention, answerTimeout: .seconds(5)) }
        let second = try await offThePool { try PostgresSessionStore(url: url, retention: retention, answerTimeout: .seconds(5)) }
        defer {
            first.close()
            second.close()
        }
        let record = SessionRecord(id: Self.id, tokenHash: TokenHash.sha256(Array(Self.token.utf8)), feature: "counter", created: 1)
        let state = Array(#"{"count":0,"pad":""#.utf8) + (0..<300_000).map { UInt8(ascii: "a") + UInt8($0 % 26) } + Array(#""}"#.utf8)
        let snapshot = SessionSnapshot(version: 0, lastSequence: 0, nextSerial: 1, state: state, tree: Array(#"{"id":"root"}"#.utf8))
        #expect(await commit(first, [.create(record, snapshot)]) == nil)
        #expect(try server.query("SELECT count(*) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE ssl AND application_name = 'navd'",
                                 database: "postgres") != ["0"], "navd's connections use TLS")
        for round in 0..<3 {
            let started = ContinuousClock.now
            let (stored, _) = try #require(claimed(try await claim(round.isMultiple(of: 2) ? second : first)))
            #expect(stored.snapshot.state == state, "read whole")
            #expect(ContinuousClock.now - started < .seconds(3), "at once, round \(round)")
        }
    }

    /// A commit the server made whose reply does not come, on a connection that stays open, is
    /// dropped at the deadline and looked up: reported as written, since it was.
    @Test func aCommitWhoseReplyNeverComesIsLookedUpAfterTheDeadline() async throws {
        let (url, proxy, store) = try await aSessionThroughACuttingProxy(answerTimeout: .milliseconds(1500))
        defer {
            store.close()
            proxy.stop()
        }
        proxy.arm(.replyHeld)
        let started = ContinuousClock.now
        #expect(await commit(store, step(1, epoch: SessionEpoch.created)) == nil, "reported as the commit it was")
        #expect(ContinuousClock.now - started >= .milliseconds(1400), "after the deadline")
        #expect(proxy.cutCount == 1, "the reply was held")
        #expect(try await query(url, "SELECT string_agg(version::text, ',') FROM navd_transactions") == ["1"], "stored once")
        #expect(await commit(store, step(2, epoch: SessionEpoch.created)) == nil, "and the store goes on")
    }

    /// A node frozen mid-commit holds its session's row: a claim or a commit that needs the row
    /// fails once it has waited `lockTimeout`, answered 503 by the server, instead of holding
    /// every request queued behind it; and the frozen transaction, left idle, is ended by the
    /// server, so the row is free again without that node.
    @Test func aRowHeldByAFrozenTransactionFailsClaimsAndCommitsUntilTheServerEndsIt() async throws {
        let (url, first, second) = try await twoNodesAndASessionOfTheFirst()
        defer {
            first.close()
            second.close()
        }
        let frozenAt = ContinuousClock.now
        let frozen = try await offThePool { () throws -> FrozenTransaction in
            let connection = try PostgresConnection(url: url)
            try connection.execute("BEGIN; SELECT 1 FROM navd_sessions FOR NO KEY UPDATE")
            return FrozenTransaction(connection: connection)
        }
        let started = ContinuousClock.now
        await #expect(throws: StorageError.self, "the claim waited for the row, then failed") { try await claim(second) }
        let refused = await commit(first, step(1, epoch: SessionEpoch.created)) != nil
        // On a machine so busy that both waits took longer than the frozen transaction may idle
        // (`idle_in_transaction_session_timeout`), the server ended it first: the commit then
        // rightly succeeds.
        #expect(refused || ContinuousClock.now - frozenAt >= .seconds(5), "so did the holder's own commit")
        #expect(ContinuousClock.now - started < .seconds(12), "each within its lock timeout, not for as long as the row is held")

        // The frozen transaction is idle: the server ends it, and the row is free.
        var taken = false
        for _ in 0..<40 where !taken {
            if let answer = try? await claim(second), claimed(answer) != nil { taken = true } else { try await Task.sleep(for: .milliseconds(250)) }
        }
        #expect(taken, "claimed once the server ended the idle transaction")
        withExtendedLifetime(frozen) {}
    }

    /// Two nodes' stores on a fresh database, and a session the first created and holds.
    func twoNodesAndASessionOfTheFirst() async throws -> (url: String, first: PostgresSessionStore, second: PostgresSessionStore) {
        let url = try await Self.freshDatabase()
        let first = try await open(url)
        let second = try await open(url)
        await create(first)
        return (url, first, second)
    }

    func query(_ url: String, _ sql: String) async throws -> [String] {
        let database = String(url.split(separator: "/").last ?? "")
        return try await offThePool { try PostgresServer.shared().query(sql, database: database) }
    }

    /// The commit's error, nil when it was written.
    func commit(_ store: PostgresSessionStore, _ writes: [StoreWrite]) async -> StorageError? {
        await withCheckedContinuation { done in
            store.commit(writes) { result in
                if case .failure(let error) = result { done.resume(returning: error) } else { done.resume(returning: nil) }
            }
        }
    }

    func claim(_ store: PostgresSessionStore, id: String = Self.id, token: String = Self.token,
               restore: @escaping @Sendable (StoredSession, Int) -> Bool = { _, _ in true }) async throws -> SessionClaim {
        try await withCheckedContinuation { done in
            store.claim(id, authorize: { TokenHash.matches(token, $0) }, restore: restore) { done.resume(returning: $0) }
        }.get()
    }

    func delete(_ store: PostgresSessionStore, id: String = Self.id, token: String = Self.token) async throws -> SessionDeletion {
        try await withCheckedContinuation { done in
            store.delete(id, ifVersion: nil, authorize: { TokenHash.matches(token, $0) }) { done.resume(returning: $0) }
        }.get()
    }

    func claimed(_ claim: SessionClaim) -> (StoredSession, Int)? {
        if case .claimed(let stored, let epoch) = claim { return (stored, epoch) }
        return nil
    }
}

extension SessionClaim {
    var isUnreadable: Bool {
        if case .unreadable = self { return true }
        return false
    }

    var isRefused: Bool {
        if case .refused = self { return true }
        return false
    }

    var isNotFound: Bool {
        if case .notFound = self { return true }
        return false
    }
}

/// Announcements a store heard, as `"<id> <epoch>"`, in order.
final class Announcements: Sendable {
    private let heard = Mutex<[String]>([])
    var all: [String] { heard.withLock { $0 } }
    func append(_ announcement: String) { heard.withLock { $0.append(announcement) } }
}

/// A connection handed between threads by a test, never used by two at once.
private final class LostConnection: @unchecked Sendable {
    let connection: PostgresConnection
    init(connection: PostgresConnection) { self.connection = connection }
}

/// A connection left inside a transaction, as a node stopped between two statements leaves it;
/// only kept alive by the test, never used concurrently.
private final class FrozenTransaction: @unchecked Sendable {
    let connection: PostgresConnection
    init(connection: PostgresConnection) { self.connection = connection }
}
