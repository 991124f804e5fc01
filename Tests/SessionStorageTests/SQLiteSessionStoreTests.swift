import Foundation
import SessionStorage
@testable import SQLiteStorage
import Synchronization
import Testing
import TestSupport

/// The SQLite engine on real files: what goes in comes out after a reopen, what a snapshot
/// covers is dropped, and what is not navd's is refused.
@Suite struct SQLiteSessionStoreTests {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("navd-store-\(UUID().uuidString)").path
    let retention = EventRetention(count: 8, bytes: 1 << 20)

    func open(_ retention: EventRetention? = nil) throws -> SQLiteSessionStore {
        try SQLiteSessionStore(directory: directory, retention: retention ?? self.retention)
    }

    /// The scenarios every engine owes the server, on this suite's directory.
    var contract: StoreContract { StoreContract { try open($0) } }

    @Test func theDataDirectoryIsCreatedWithItsParentsPrivateToNavd() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let nested = directory + "/a/b/"
        try SQLiteSessionStore(directory: nested, retention: retention).close()
        let attributes = try FileManager.default.attributesOfItem(atPath: directory + "/a/b")
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        #expect(FileManager.default.fileExists(atPath: nested + "navd.sqlite3"))
        // A file where a directory should be is refused, and says which.
        #expect(FileManager.default.createFile(atPath: directory + "/file", contents: Data()))
        #expect {
            try SQLiteSessionStore(directory: directory + "/file/store", retention: retention)
        } throws: { error in
            "\(error)".contains("\(directory)/file: Not a directory")
        }
    }

    @Test func whatIsCommittedComesBackAfterAReopen() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try contract.whatIsCommittedComesBack()
    }

    /// How long each session had gone unused comes back after a reopen, by the store's clock:
    /// it runs while the store is open and stops while it is closed. After a crash (the store
    /// not closed) it is not known. A record for a session deleted meanwhile leaves nothing.
    @Test func howLongASessionWentUnusedComesBackWithoutTheTimeTheStoreWasClosed() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let opened = ContinuousClock.now
        let store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0)), .create(record("b"), snapshot(version: 0, last: 0))])
        try await Task.sleep(for: .milliseconds(400))
        let said = ContinuousClock.now
        try commit(store, [.idle(seconds: ["a": 0.05])])
        store.close()
        let wasOpen = (ContinuousClock.now - opened) / .seconds(1), sinceSaid = (ContinuousClock.now - said) / .seconds(1)
        // Closed: this is no one's idle time.
        try await Task.sleep(for: .milliseconds(600))
        var reopened = try open()
        var loaded = try reopened.loadAll().sessions
        reopened.close()
        let a = try #require(loaded.first?.idleSeconds), b = try #require(loaded.last?.idleSeconds)
        #expect(a >= 0.05 && a <= 0.05 + sinceSaid, "as idle as the last process said: \(a)")
        #expect(b >= 0.4 && b <= wasOpen, "idle for the \(wasOpen) s the store was open, not the 600 ms it was closed: \(b)")

        // A process that stopped without closing the store (a crash) recorded nothing of its last moments.
        let file = (directory as NSString).appendingPathComponent("navd.sqlite3")
        try SQLiteDatabase(path: file).execute("UPDATE clock SET closed = 0")
        reopened = try open()
        loaded = try reopened.loadAll().sessions
        #expect(loaded.map(\.idleSeconds) == [nil, nil], "not known: the restart counts as a use")
        try commit(reopened, [.delete(id: "b")])
        try commit(reopened, [.idle(seconds: ["a": 0, "b": 0])])
        reopened.close()
        #expect(try open().loadAll().sessions.map(\.record.id) == ["a"])
        #expect(try SQLiteDatabase(path: file).integer("SELECT count(*) FROM uses") == 1, "b's record is gone with it")
    }

    /// Versions 3 and 4 kept no clock of the store's (4 recorded use by the wall clock): their
    /// sessions count as used at the upgrade, and from then on their idle time is kept.
    @Test(arguments: [3, 4])
    func anOlderStoreCountsItsSessionsAsUsedAtTheUpgrade(version: Int) async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        store.close()
        let file = (directory as NSString).appendingPathComponent("navd.sqlite3")
        try SQLiteDatabase(path: file).execute(version == 3 ? "DROP TABLE uses; DROP TABLE clock; PRAGMA user_version = 3" : """
            DROP TABLE clock; UPDATE uses SET at = (julianday('now') - 2440587.5) * 86400 - 100; PRAGMA user_version = 4
            """)
        store = try open()
        #expect(try store.loadAll().sessions.map(\.idleSeconds) == [nil])
        // Idle no longer than the store has been open, as a session restored here can be.
        try await Task.sleep(for: .milliseconds(300))
        try commit(store, [.idle(seconds: ["a": 0.25])])
        store.close()
        let idle = try #require(try open().loadAll().sessions.first?.idleSeconds)
        #expect(idle >= 0.25 && idle < 1, "as the process after the upgrade said: \(idle)")
        #expect(try SQLiteDatabase(path: file).integer("PRAGMA user_version") == SQLiteSchema.version)
    }

    /// Version 5 had no mark for a copy: the upgrade adds it, unset, and keeps every session.
    @Test func aVersionFiveStoreGainsTheCopyMarkAndKeepsItsSessions() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 3, last: 5)), .transaction(id: "a", transaction(version: 4, events: 6...6))])
        store.close()
        let file = (directory as NSString).appendingPathComponent("navd.sqlite3")
        try SQLiteDatabase(path: file).execute("ALTER TABLE clock DROP COLUMN copied; PRAGMA user_version = 5")
        store = try open()
        let a = try #require(try store.loadAll().sessions.first)
        store.close()
        #expect(a.snapshot.version == 3 && a.transactions.map(\.version) == [4], "no counter moved: not a copy")
        #expect(try SQLiteDatabase(path: file).integer("SELECT copied FROM clock") == 0)
        #expect(try SQLiteDatabase(path: file).integer("PRAGMA user_version") == SQLiteSchema.version)
    }

    @Test func aSnapshotDropsTheTransactionsItCoversAndTrimsEventsToTheBuffer() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try contract.aSnapshotDropsTheTransactionsItCovers()
        #expect(try rowCounts() == [1, 9], "rows 5…12 were kept at the snapshot for their events, then 13")
    }

    @Test func eventsAreTrimmedByBytesToo() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try contract.eventsAreTrimmedByBytes(EventRetention(count: 100, bytes: 2500))
        #expect(try rowCounts() == [1, 3], "rows 3…5 could hold kept events")
    }

    /// Replaying a transaction needs its events, however few the buffer keeps: more events since
    /// the snapshot than the buffer holds (a restart with a smaller `--event-buffer`) still load.
    @Test func transactionsSinceTheSnapshotComeBackWithAllTheirEvents() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try open(EventRetention(count: 100, bytes: 1 << 20))
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        for version in 1...6 {
            try commit(store, [.transaction(id: "a", transaction(version: version, events: (2 * version - 1)...(2 * version)))])
        }
        store.close()
        let a = try #require(try open(EventRetention(count: 3, bytes: 1 << 20)).loadAll().sessions.first)
        #expect(a.transactions.map(\.events.count) == Array(repeating: 2, count: 6))
        #expect(a.transactions.flatMap(\.events).map(\.sequence) == Array(1...12))
        #expect(a.events.map(\.sequence) == [10, 11, 12], "what Last-Event-ID gets is the buffer's")
    }

    /// A start reads kept events only as far as memory has room once the states are back,
    /// newest first across sessions: the journal may hold an event buffer's worth for every
    /// session, far more than the sessions' budget. What each session replays comes back
    /// whatever the room, and each session's events stay its newest, unbroken.
    @Test func aStartReadsKeptEventsOnlyAsFarAsMemoryHasRoom() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try open(EventRetention(count: 100, bytes: 1 << 20))
        let big = "\"" + String(repeating: "x", count: 998) + "\""  // 1000 bytes
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0)), .create(record("b"), snapshot(version: 0, last: 0))])
        for version in 1...6 {
            try commit(store, [.transaction(id: "a", transaction(version: version, events: version...version, data: big)),
                               .transaction(id: "b", transaction(version: version, events: version...version, data: big))])
        }
        // a's snapshot covers 1…5: 6 is replayed. b has no snapshot since 0: all six are replayed.
        try commit(store, [.snapshot(id: "a", snapshot(version: 5, last: 5))])
        store.close()

        let all = try open(EventRetention(count: 100, bytes: 1 << 20)).loadAll().sessions
        #expect(all.map { $0.events.count } == [6, 6])

        // Room for the states and the newest four rows' events (b6, a6, b5, a5, a thousand bytes
        // each) but not a fifth.
        let states = all.reduce(0) { $0 + $1.snapshot.state.count + 100 }
        var loaded: [StoredSession] = []
        let failed = try open(EventRetention(count: 100, bytes: 1 << 20)).load(within: states + 4_500, perSession: 100) { loaded.append($0) }
        #expect(failed.isEmpty)
        let a = try #require(loaded.first { $0.record.id == "a" })
        let b = try #require(loaded.first { $0.record.id == "b" })
        #expect(a.transactions.map(\.version) == [6] && a.transactions[0].events.map(\.sequence) == [6], "what a replays")
        #expect(a.events.map(\.sequence) == [5, 6], "a's newest, as far as the room goes")
        #expect(b.transactions.count == 6 && b.events.map(\.sequence) == Array(1...6), "b replays all six, so keeps them")
        #expect(try open(EventRetention(count: 100, bytes: 1 << 20)).loadAll().sessions == all, "what was not read is still on disk")
    }

    @Test func aDeletedSessionLeavesNothingBehind() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try contract.aDeletedSessionIsGone()
        #expect(try rowCounts() == [1, 0], "only the other session's record")
    }

    /// Pages a deletion freed go back to the file system, a step after each commit and the rest
    /// at close, so the file is proportional to live data even when nothing is written after.
    @Test(arguments: [false, true])
    func whatADeletionFreedLeavesTheFile(closing: Bool) async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try open()
        let large = SessionSnapshot(version: 0, lastSequence: 0, nextSerial: 7, state: Array(repeating: UInt8(ascii: "7"), count: 16 << 20),
                                    tree: Array(#"{"id":"root"}"#.utf8), extras: [])
        try commit(store, [.create(record("a"), large), .create(record("b"), snapshot(version: 0, last: 0))])
        try commit(store, [.delete(id: "a")])
        func size() -> Int {
            ((try? FileManager.default.attributesOfItem(atPath: directory + "/navd.sqlite3"))?[.size] as? Int) ?? .max
        }
        if closing {
            store.close()
        } else {
            // Idle: nothing is committed after the deletion.
            _ = await eventually { size() < 5 << 20 }
        }
        #expect(size() < 5 << 20, "16 MiB freed, \(size()) bytes left")
        if !closing { store.close() }
        #expect(try open().loadAll().sessions.map(\.record.id) == ["b"])
    }

    /// A file that cannot give pages back a step at a time (an operator turned incremental
    /// vacuum off) keeps them, and the store still commits and closes.
    @Test func aFileWithoutIncrementalVacuumKeepsItsPagesAndStillCloses() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try open().close()
        try SQLiteDatabase(path: directory + "/navd.sqlite3").execute("PRAGMA auto_vacuum = NONE; VACUUM;")
        let store = try open()
        let large = SessionSnapshot(version: 0, lastSequence: 0, nextSerial: 7, state: Array(repeating: UInt8(ascii: "7"), count: 8 << 20),
                                    tree: Array(#"{"id":"root"}"#.utf8), extras: [])
        try commit(store, [.create(record("a"), large), .create(record("b"), snapshot(version: 0, last: 0))])
        try commit(store, [.delete(id: "a")])
        try commit(store, [.transaction(id: "b", transaction(version: 1, events: 1...1))])
        let closed = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            store.close()
            closed.signal()
        }
        #expect(closed.wait(timeout: .now() + 10) == .success, "close gave up on what it cannot give back")
        #expect(try open().loadAll().sessions.map(\.record.id) == ["b"])
    }

    @Test func manyConcurrentCommitsShareSyncs() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(try await contract.concurrentCommitsShareCommits().bytesOnDisk > 0)
    }

    @Test func aWriteWhoseEarlierWriteFailedIsRefusedUnwritten() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try contract.aWriteWhoseEarlierWriteFailedIsRefusedUnwritten(rounds: 10)
    }

    @Test func aBatchIsOneJournalRowAndItsEventsComeBackExactly() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try open()
        // Data as a client was sent it: nested, escaped, non-ASCII; a kind that needs escaping.
        let data = #"{"patch":[{"op":"replace","path":"/a~1b","value":"\"quoted\" \u00e9 ü\n"}],"n":[1.5e3,-0,true,null]}"#
        let events = [StoredEvent(sequence: 1, kind: "state", data: Array(data.utf8)),
                      StoredEvent(sequence: 2, kind: "odd\"kind", data: Array("{}".utf8))]
        let batch = SessionTransaction(version: 1, lastSequence: 2, nextSerial: 8, statePatch: Array("[]".utf8), events: events)
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0)), .transaction(id: "a", batch)])
        store.close()
        #expect(try rowCounts() == [1, 1], "one row per batch, its events inside")

        let a = try #require(try open().loadAll().sessions.first)
        #expect(a.events.map(\.sequence) == [1, 2])
        #expect(a.events.map(\.kind) == ["state", "odd\"kind"])
        // The same JSON value (SQLite may drop insignificant whitespace; there is none here).
        #expect(a.events.map { String(decoding: $0.data, as: UTF8.self) } == [data, "{}"])
        #expect(a.transactions.map(\.events) == [events])
    }

    @Test func aVersionOneStoreIsUpgradedWithItsSessionsTransactionsAndEvents() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let a = record("a")
        let state = snapshot(version: 2, last: 2)
        // Events 1…2 are covered by the snapshot; 3…4 belong to the transaction after it.
        let after = transaction(version: 3, events: 3...4)
        try writeVersionOneStore(a, state, after)
        let store = try open()
        let loaded = try store.loadAll()
        store.close()
        let upgraded = try #require(loaded.sessions.first)
        #expect(loaded.failed.isEmpty)
        #expect(upgraded.record == a)
        #expect(upgraded.snapshot == state)
        #expect(upgraded.transactions == [after])
        #expect(upgraded.events.map(\.sequence) == [1, 2, 3, 4])
        #expect(upgraded.idleSeconds == nil, "not known: used at the upgrade")
        let upgradedFile = try SQLiteDatabase(path: (directory as NSString).appendingPathComponent("navd.sqlite3"))
        #expect(try upgradedFile.integer("SELECT count(*) FROM sqlite_schema WHERE name IN ('transactions', 'events')") == 0)
        #expect(try upgradedFile.integer("PRAGMA user_version") == SQLiteSchema.version)
    }

    /// Which rows are whose lives in memory, rebuilt at a start: a snapshot and a deletion after a
    /// reopen find the rows written before it.
    @Test func rowsWrittenBeforeAReopenAreTrimmedAndDeletedAfterIt() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0)), .create(record("b"), snapshot(version: 0, last: 0))])
        for version in 1...12 {
            try commit(store, [.transaction(id: "a", transaction(version: version, events: version...version)),
                               .transaction(id: "b", transaction(version: version, events: version...version))])
        }
        store.close()
        store = try open()
        _ = try store.loadAll()
        try commit(store, [.snapshot(id: "a", snapshot(version: 12, last: 12, state: #"{"count":12}"#)),
                           .transaction(id: "a", transaction(version: 13, events: 13...13))])
        try commit(store, [.delete(id: "b")])
        store.close()
        #expect(try rowCounts() == [1, 9], "a: rows 5…13 kept for the buffer of eight; b: none")
        let a = try #require(try open().loadAll().sessions.first)
        #expect(a.events.map(\.sequence) == Array(6...13))
        #expect(a.transactions == [transaction(version: 13, events: 13...13)])
    }

    /// A commit that fails takes back what it told the index: the bytes it counted would
    /// otherwise make the next snapshot drop events the buffer keeps.
    @Test func aFailedCommitLeavesTheIndexAsTheFileIs() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let retention = EventRetention(count: 100, bytes: 3000)
        let store = try open(retention)
        let event = "\"" + String(repeating: "x", count: 998) + "\""  // 1000 bytes
        let huge = "\"" + String(repeating: "y", count: 9998) + "\""
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        for version in 1...3 {
            try commit(store, [.transaction(id: "a", transaction(version: version, events: version...version, data: event))])
        }
        // One request: its transaction is written, then its create fails (the id exists), so none of it is.
        #expect(throws: StorageError.self) {
            try commit(store, [.transaction(id: "a", transaction(version: 4, events: 4...4, data: huge)),
                               .create(record("a"), snapshot(version: 0, last: 0))])
        }
        try commit(store, [.transaction(id: "a", transaction(version: 4, events: 4...4, data: event)),
                           .snapshot(id: "a", snapshot(version: 4, last: 4))])
        store.close()
        #expect(try rowCounts() == [1, 3], "rows 2…4 hold the newest 3,000 bytes")
        let a = try #require(try open(retention).loadAll().sessions.first)
        #expect(a.events.map(\.sequence) == [2, 3, 4])
    }

    /// Version 2 indexed the journal by session; the upgrade drops the index and keeps the rows.
    @Test func aVersionTwoStoreLosesItsIndexAndKeepsItsSessions() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0)),
                           .transaction(id: "a", transaction(version: 1, events: 1...2))])
        store.close()
        let file = (directory as NSString).appendingPathComponent("navd.sqlite3")
        try SQLiteDatabase(path: file).execute("""
            DROP TABLE uses; DROP TABLE clock; CREATE INDEX journal_by_session ON journal (session, ordinal); PRAGMA user_version = 2
            """)
        store = try open()
        let a = try #require(try store.loadAll().sessions.first)
        store.close()
        #expect(a.transactions == [transaction(version: 1, events: 1...2)])
        #expect(a.events.map(\.sequence) == [1, 2])
        let upgraded = try SQLiteDatabase(path: file)
        #expect(try upgraded.integer("SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'journal_by_session'") == 0)
        #expect(try upgraded.integer("PRAGMA user_version") == SQLiteSchema.version)
    }

    @Test func aFileThatIsNotNavdsIsRefused() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let file = (directory as NSString).appendingPathComponent("navd.sqlite3")
        try Data(repeating: 0x41, count: 8192).write(to: URL(fileURLWithPath: file))
        #expect(throws: StorageError.self) { try open() }

        // A SQLite database of someone else's.
        try FileManager.default.removeItem(atPath: file)
        let foreign = try SQLiteDatabase(path: file)
        try foreign.execute("CREATE TABLE notes (body TEXT)")
        #expect { try open() } throws: { error in
            (error as? StorageError).map { "\($0)".contains("not a navd session store") } ?? false
        }
    }

    /// An empty file where the store should be (a restore that failed) is refused, not taken
    /// for a new store; a new store is made aside and moved into place whole, so navd itself
    /// never leaves an empty one.
    @Test func anEmptyFileIsRefusedAndANewStoreIsMadeWhole() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let file = (directory as NSString).appendingPathComponent("navd.sqlite3")
        #expect(FileManager.default.createFile(atPath: file, contents: Data()))
        #expect { try open() } throws: { error in
            (error as? StorageError).map { "\($0)".contains("is empty (0 bytes)") } ?? false
        }
        #expect(try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int == 0, "left as it was")

        try FileManager.default.removeItem(atPath: file)
        // What a creation that crashed halfway left aside is made again.
        #expect(FileManager.default.createFile(atPath: file + ".new", contents: Data("half".utf8)))
        let store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        store.close()
        #expect(!FileManager.default.fileExists(atPath: file + ".new"))
        #expect(try open().loadAll().sessions.map(\.record.id) == ["a"])
    }

    /// A new store and its log are readable by navd alone, like its copies: the umask, or a data
    /// directory made beforehand (a mounted volume) with room for others, does not open them.
    @Test func aNewStoreAndItsLogAreReadableByNavdAlone() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        let mask = umask(0o022)
        defer { umask(mask) }
        let store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        let file = (directory as NSString).appendingPathComponent("navd.sqlite3")
        for path in [file, file + "-wal"] {
            #expect((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) == 0o600, "\(path)")
        }
        store.close()
    }

    /// A log left without its database (a restore that missed the file) is refused: opened, SQLite
    /// would replay it onto a new store, which would start without its sessions, and damaged.
    @Test func aLogWithoutItsDatabaseIsRefused() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let file = (directory as NSString).appendingPathComponent("navd.sqlite3")
        #expect(FileManager.default.createFile(atPath: file + "-wal", contents: Data(repeating: 7, count: 4096)))
        #expect { try open() } throws: { error in
            (error as? StorageError).map { "\($0)".contains("-wal is there without") } ?? false
        }
        #expect(!FileManager.default.fileExists(atPath: file), "no store made beside it")
        #expect(try FileManager.default.attributesOfItem(atPath: file + "-wal")[.size] as? Int == 4096, "left as it was")
        try FileManager.default.removeItem(atPath: file + "-wal")
        try open().close()
    }

    /// A store says whether it made itself: a start on a directory without one shows as one.
    @Test func aStoreSaysWhetherThisOpenMadeIt() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try open()
        #expect(first.wasCreated)
        first.close()
        let again = try open()
        #expect(!again.wasCreated)
        again.close()
    }

    /// A store file removed (or replaced) under a running navd takes no more commits: they
    /// would be acknowledged and then lost at the next start. Put back, it takes them again.
    @Test func aStoreFileRemovedWhileOpenFailsCommitsUntilItIsBack() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try open()
        defer { store.close() }
        try commit(store, [.create(record("s1"), snapshot(version: 1, last: 0))])
        let file = (directory as NSString).appendingPathComponent("navd.sqlite3")
        try FileManager.default.moveItem(atPath: file, toPath: file + ".moved")
        #expect { try commit(store, [.transaction(id: "s1", transaction(version: 2, events: 1...1))]) } throws: { error in
            (error as? StorageError).map { "\($0)".contains("was removed or replaced") } ?? false
        }
        try FileManager.default.moveItem(atPath: file + ".moved", toPath: file)
        try commit(store, [.transaction(id: "s1", transaction(version: 2, events: 1...1))])

        // Its log too: what a commit puts there is what a restart replays.
        try FileManager.default.moveItem(atPath: file + "-wal", toPath: file + "-wal.moved")
        #expect { try commit(store, [.transaction(id: "s1", transaction(version: 3, events: 2...2))]) } throws: { error in
            (error as? StorageError).map { "\($0)".contains("or its log was removed or replaced") } ?? false
        }
        try FileManager.default.moveItem(atPath: file + "-wal.moved", toPath: file + "-wal")
        try commit(store, [.transaction(id: "s1", transaction(version: 3, events: 2...2))])
    }

    /// Two navd starting on one new directory at once: one makes the store and keeps it, the
    /// other is refused as for any store in use, and what is left is one whole store.
    @Test func twoStartsOnANewDirectoryMakeOneStore() throws {
        for round in 0..<12 {
            let directory = self.directory + "-\(round)"
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let outcomes = Mutex<[Result<SQLiteSessionStore, StorageError>]>([])
            DispatchQueue.concurrentPerform(iterations: 2) { _ in
                let outcome = Result { () throws(StorageError) in try SQLiteSessionStore(directory: directory, retention: retention) }
                outcomes.withLock { $0.append(outcome) }
            }
            let all = outcomes.withLock { $0 }
            let opened = all.compactMap { try? $0.get() }
            let refusals = all.compactMap { outcome -> String? in
                if case .failure(let error) = outcome { return "\(error)" } else { return nil }
            }
            #expect(opened.count == 1, "round \(round): \(refusals)")
            #expect(refusals.allSatisfy { $0.contains("in use") }, "round \(round): \(refusals)")
            for store in opened {
                try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
                store.close()
            }
            let reopened = try SQLiteSessionStore(directory: directory, retention: retention)
            #expect(try reopened.loadAll().sessions.map(\.record.id) == ["a"])
            reopened.close()
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory).filter { $0.contains(".new") } == [])
        }
    }

    /// A use recorded outside the store's clock is a damaged row: not taken as told (it could
    /// expire every session at once), so the restart counts as the session's use.
    @Test func aUseRecordedOutsideTheStoresClockIsNotTakenAsTold() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0)), .create(record("b"), snapshot(version: 0, last: 0)),
                           .create(record("c"), snapshot(version: 0, last: 0))])
        try commit(store, [.idle(seconds: ["a": 0, "b": 0, "c": 0])])
        store.close()
        let file = (directory as NSString).appendingPathComponent("navd.sqlite3")
        try SQLiteDatabase(path: file).execute("""
            UPDATE uses SET at = -1e300 WHERE session = 'a';
            UPDATE uses SET at = (SELECT seconds FROM clock) + 1000 WHERE session = 'b'
            """)
        let loaded = try open().loadAll().sessions
        #expect(loaded.map(\.record.id) == ["a", "b", "c"])
        #expect(loaded.map { $0.idleSeconds == nil } == [true, true, false])
    }

    @Test func aStoreFromANewerNavdIsRefused() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try open().close()
        let file = (directory as NSString).appendingPathComponent("navd.sqlite3")
        try SQLiteDatabase(path: file).execute("PRAGMA user_version = \(SQLiteSchema.version + 1)")
        #expect { try open() } throws: { error in
            (error as? StorageError).map { "\($0)".contains("newer navd") } ?? false
        }
    }

    /// What the store opens is closed on exec, and so is every descriptor it keeps: a process
    /// started meanwhile (a host's child; in the suite, a PostgreSQL server) kept the data
    /// directory's descriptor, and the lock taken on it while the store opens, for its whole
    /// life, so the next open of that directory waited for good.
    @Test func theStoresDescriptorsAreClosedOnExec() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try open()
        defer { store.close() }
        let folder = systemOpen(directory, O_RDONLY)
        #expect(folder >= 0)
        defer { Glibc.close(folder) }
        #expect(fcntl(folder, F_GETFD) & FD_CLOEXEC != 0)
        let kept = try FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd").compactMap { Int32($0) }.filter { descriptor in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/\(descriptor)"))?.hasPrefix(directory) == true
        }
        #expect(kept.count >= 2, "the store and its log")
        for descriptor in kept { #expect(fcntl(descriptor, F_GETFD) & FD_CLOEXEC != 0, "descriptor \(descriptor)") }
    }

    @Test func aSecondProcessOnTheSameDirectoryIsRefused() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try open()
        #expect { try open() } throws: { error in
            (error as? StorageError).map { "\($0)".contains("in use") } ?? false
        }
        first.close()
        try open().close()
    }

    @Test func aCorruptRecordIsReportedAndTheRestLoad() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try open()
        try commit(store, [.create(record("good"), snapshot(version: 0, last: 0)), .create(record("bad"), snapshot(version: 0, last: 0))])
        store.close()
        let file = (directory as NSString).appendingPathComponent("navd.sqlite3")
        try SQLiteDatabase(path: file).execute("UPDATE sessions SET token_hash = x'00' WHERE id = 'bad'")
        let loaded = try open().loadAll()
        #expect(loaded.sessions.map(\.record.id) == ["good"])
        #expect(loaded.failed == ["bad"])
        // Rows without a text id are reported too: a NULL or empty one, which paging by id
        // cannot reach, and a blob, which sorts after every text and would be met on every page.
        let again = try open()
        try commit(again, [.create(record("x"), snapshot(version: 0, last: 0)), .create(record("y"), snapshot(version: 0, last: 0)),
                           .create(record("z"), snapshot(version: 0, last: 0))])
        again.close()
        try SQLiteDatabase(path: file).execute(
            "UPDATE sessions SET id = NULL WHERE id = 'x'; UPDATE sessions SET id = '' WHERE id = 'y'; UPDATE sessions SET id = x'7a' WHERE id = 'z'")
        let reloaded = try open().loadAll()
        #expect(reloaded.sessions.map(\.record.id) == ["good"])
        #expect(reloaded.failed.count == 4 && reloaded.failed.first == "bad", "\(reloaded.failed)")
    }

    @Test func aJournalRowThatIsNotNavdsFailsOnlyItsSession() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try open()
        try commit(store, [.create(record("good"), snapshot(version: 0, last: 0)), .create(record("bad"), snapshot(version: 0, last: 0)),
                           .transaction(id: "good", transaction(version: 1, events: 1...1)),
                           .transaction(id: "bad", transaction(version: 1, events: 1...1))])
        store.close()
        let file = (directory as NSString).appendingPathComponent("navd.sqlite3")
        try SQLiteDatabase(path: file).execute("UPDATE journal SET events = '[[1,' WHERE session = 'bad'")
        let loaded = try open().loadAll()
        #expect(loaded.sessions.map(\.record.id) == ["good"])
        #expect(loaded.sessions.first?.transactions == [transaction(version: 1, events: 1...1)])
        #expect(loaded.failed == ["bad"])
    }

    // MARK: - Backups

    /// A copy taken while commits go on is a store of its own: it opens like any other, with
    /// every session, and of a session written meanwhile it holds an unbroken run of what was
    /// acknowledged: everything before the copy was asked for, and nothing never acknowledged.
    @Test func aBackupTakenWhileCommitsGoOnIsAWholeStoreOfItsOwn() async throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try open(EventRetention(count: 10_000, bytes: 1 << 30))
        try fillWithSessions(store)
        let before = 20
        for version in 1...before { try commit(store, [.transaction(id: "s0", transaction(version: version, events: version...version))]) }
        // s1 has rows kept only for their events, below a snapshot, and rows after it.
        for version in 1...3 { try commit(store, [.transaction(id: "s1", transaction(version: version, events: version...version))]) }
        try commit(store, [.snapshot(id: "s1", snapshot(version: 3, last: 3))])
        try commit(store, [.transaction(id: "s1", transaction(version: 4, events: 4...4))])

        let backups = directory + "/backups"
        let written = Mutex<Result<StoreBackup, StorageError>?>(nil)
        store.backUp(into: backups) { result in written.withLock { $0 = result } }
        var version = before
        while written.withLock({ $0 }) == nil {
            version += 1
            try commit(store, [.transaction(id: "s0", transaction(version: version, events: version...version))])
        }
        let backup = try #require(try written.withLock { $0 }?.get())
        #expect(version > before + 1, "commits went on while the copy was made (\(version - before) of them)")
        try commit(store, [.transaction(id: "s0", transaction(version: version + 1, events: (version + 1)...(version + 1)))])
        store.close()

        #expect(backup.path.hasPrefix(backups + "/navd-") && backup.path.hasSuffix("Z.sqlite3"), "\(backup.path)")
        let files = try FileManager.default.contentsOfDirectory(atPath: backups)
        #expect(files == [(backup.path as NSString).lastPathComponent], "no partial copy left: \(files)")
        let attributes = try FileManager.default.attributesOfItem(atPath: backups)
        #expect((attributes[.posixPermissions] as? Int) == 0o700)
        #expect((try FileManager.default.attributesOfItem(atPath: backup.path)[.size] as? Int) == backup.bytes)

        #expect((try FileManager.default.attributesOfItem(atPath: backup.path)[.posixPermissions] as? Int) == 0o600, "the copy holds every state")

        let restored = directory + "/restored"
        try FileManager.default.createDirectory(atPath: restored, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: backup.path, toPath: restored + "/navd.sqlite3")
        let retention = EventRetention(count: 10_000, bytes: 1 << 30)
        var copy = try SQLiteSessionStore(directory: restored, retention: retention)
        let loaded = try copy.loadAll()
        copy.close()
        #expect(loaded.failed.isEmpty)
        #expect(loaded.sessions.count == 200)
        // The store the copy was taken of went on issuing versions and ids, and so may an earlier
        // restore of this copy: the copy's sessions go on from past the wall clock's mark, every
        // counter of a session moved alike, so each history is unbroken.
        let gap = SQLiteSchema.gapAfterCopy
        let mark = Int(Date().timeIntervalSince1970) * SQLiteSchema.idsPerSecond
        let s0 = try #require(loaded.sessions.first { $0.record.id == "s0" })
        let base = s0.snapshot.version
        #expect(abs(base - gap - mark) <= 60 * SQLiteSchema.idsPerSecond, "\(base) against the mark \(mark) + \(gap)")
        #expect(s0.snapshot.lastSequence == base && s0.snapshot.nextSerial == base, "0, 0 and 7 are all below the mark")
        let kept = s0.transactions.map(\.version)
        #expect(kept.count >= before && kept.count <= version, "\(kept.count) transactions, \(before) acknowledged before the copy")
        #expect(kept == Array((base + 1)...(base + kept.count)), "an unbroken run from the first, moved on")
        #expect(s0.events.map(\.sequence) == kept)
        #expect(s0.transactions.map(\.lastSequence) == kept && s0.transactions.map(\.nextSerial) == kept)
        #expect(s0.events.first?.data == Array(#"{"count":1}"#.utf8), "each event's data as it was")
        // The rows kept only for a client resuming from their events are gone: every id a
        // client holds is below the session's first now.
        let s1 = try #require(loaded.sessions.first { $0.record.id == "s1" })
        #expect(s1.snapshot.version == base && s1.transactions.map(\.version) == [base + 1])
        #expect(s1.events.map(\.sequence) == [base + 1])
        let s2 = try #require(loaded.sessions.first { $0.record.id == "s2" })
        #expect(s2.snapshot.version == base && s2.transactions.isEmpty && s2.events.isEmpty)
        // Once: the copy, opened, is a store like any other.
        copy = try SQLiteSessionStore(directory: restored, retention: retention)
        #expect(try copy.loadAll().sessions.first { $0.record.id == "s0" }?.transactions.map(\.version) == kept)
        copy.close()
    }

    /// A copy restored twice goes on, the second time, from past wherever the first restore can
    /// have got by then (the wall clock's mark moved on); a copy of a restored copy, from past
    /// its own counters. Neither hands out an id a client may hold with another meaning.
    @Test func aCopyRestoredTwiceOrCopiedAgainGoesOnPastEveryEarlierRestore() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 5, last: 5))])
        let first = try backUp(store, into: directory + "/backups")
        store.close()
        let mark = SQLiteSchema.gapAfterCopy + Int(Date().timeIntervalSince1970) * SQLiteSchema.idsPerSecond
        // Opened now, and as if a day had passed: the later restore starts past every id the
        // earlier one can have issued in that day, a million a second.
        let now = try restore(first, as: "now")
        let file = directory + "/later/navd.sqlite3"
        try FileManager.default.createDirectory(atPath: directory + "/later", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: first, toPath: file)
        let later = try SQLiteDatabase(path: file)
        try later.execute("PRAGMA journal_mode = DELETE; UPDATE clock SET copied = 0;")
        try later.execute(SQLiteSchema.continueFromCopy(secondsSince1970: Int(Date().timeIntervalSince1970) + 86_400))
        let tomorrow = try #require(try SQLiteSessionStore(directory: directory + "/later", retention: retention).loadAll().sessions.first)
        #expect(now.snapshot.version >= mark - 60 * SQLiteSchema.idsPerSecond)
        #expect(tomorrow.snapshot.version - now.snapshot.version >= 86_400 * SQLiteSchema.idsPerSecond - 60 * SQLiteSchema.idsPerSecond)
        // A copy of the restored store: past its own counters.
        let restoredStore = try SQLiteSessionStore(directory: directory + "/now", retention: retention)
        try commit(restoredStore, [.transaction(id: "a", transaction(version: now.snapshot.version + 1, events: (now.snapshot.lastSequence + 1)...(now.snapshot.lastSequence + 1)))])
        let second = try backUp(restoredStore, into: directory + "/backups")
        restoredStore.close()
        let again = try restore(second, as: "again")
        #expect(again.snapshot.version > now.snapshot.version + 1 && again.snapshot.version >= now.snapshot.version + SQLiteSchema.gapAfterCopy)
        #expect(again.transactions.isEmpty || again.transactions.first?.version == again.snapshot.version + 1)
    }

    /// `restore` puts a copy in place as the store of an empty directory; it refuses one that
    /// holds a store, or only its log (which would be read into the copy), and a file that is
    /// not a navd store, leaving everything as it was.
    @Test func aCopyIsRestoredIntoAnEmptyDirectoryOnly() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 5, last: 5))])
        let copy = try backUp(store, into: directory + "/backups")
        store.close()

        let fresh = directory + "/fresh/data"
        let path = try SQLiteSessionStore.restore(copy, into: fresh)
        #expect(path == fresh + "/navd.sqlite3")
        #expect((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: fresh) == ["navd.sqlite3"])
        let restored = try SQLiteSessionStore(directory: fresh, retention: retention)
        let a = try #require(try restored.loadAll().sessions.first)
        restored.close()
        #expect(a.record.id == "a" && a.snapshot.version > SQLiteSchema.gapAfterCopy, "a copy: its ids moved on")

        // The store the copy came from is still there: refused, and untouched.
        let before = try Data(contentsOf: URL(fileURLWithPath: directory + "/navd.sqlite3"))
        #expect { try SQLiteSessionStore.restore(copy, into: directory) } throws: { "\($0)".contains("holds a store already") }
        #expect(try Data(contentsOf: URL(fileURLWithPath: directory + "/navd.sqlite3")) == before)
        // Only a log left of a store: refused too.
        let logOnly = directory + "/log-only"
        try FileManager.default.createDirectory(atPath: logOnly, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: logOnly + "/navd.sqlite3-wal", contents: Data(count: 4096)))
        #expect { try SQLiteSessionStore.restore(copy, into: logOnly) } throws: { "\($0)".contains("navd.sqlite3-wal") }
        #expect(try FileManager.default.contentsOfDirectory(atPath: logOnly) == ["navd.sqlite3-wal"])
        // Not a navd store, or no file at all.
        let stranger = directory + "/stranger.sqlite3"
        try SQLiteDatabase(path: stranger).execute("CREATE TABLE t (x)")
        #expect { try SQLiteSessionStore.restore(stranger, into: directory + "/other") } throws: { "\($0)".contains("is not a navd session store") }
        #expect { try SQLiteSessionStore.restore(directory + "/missing.sqlite3", into: directory + "/other") } throws: {
            "\($0)".contains("missing.sqlite3: No such file or directory")
        }
        #expect(!FileManager.default.fileExists(atPath: directory + "/other"), "a refused copy makes no directory")
    }

    /// Writes a copy of `store` into `directory` and waits for it; its path.
    func backUp(_ store: SQLiteSessionStore, into directory: String) throws -> String {
        let written = Mutex<Result<StoreBackup, StorageError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        store.backUp(into: directory) { result in
            written.withLock { $0 = result }
            done.signal()
        }
        guard done.wait(timeout: .now() + 10) == .success else { throw StorageError.unavailable("the copy took too long") }
        return try #require(try written.withLock { $0 }?.get()).path
    }

    /// Opens a copy of `copy` as the store of `directory/name`; its one session as loaded.
    func restore(_ copy: String, as name: String) throws -> StoredSession {
        try FileManager.default.createDirectory(atPath: directory + "/" + name, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: copy, toPath: directory + "/" + name + "/navd.sqlite3")
        let store = try SQLiteSessionStore(directory: directory + "/" + name, retention: retention)
        defer { store.close() }
        return try #require(try store.loadAll().sessions.first)
    }

    /// A partial copy that nobody has written for ten minutes was left by a process that died
    /// making it: the next copy removes it. A fresher one may be another process's, and stays.
    @Test func aPartialCopyLeftByADeadProcessIsRemovedByTheNextCopy() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try open()
        defer { store.close() }
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        let backups = directory + "/backups"
        try FileManager.default.createDirectory(atPath: backups, withIntermediateDirectories: true)
        let old = backups + "/navd-20260101T000000Z.sqlite3.partial", fresh = backups + "/navd-20260101T000001Z.sqlite3.partial"
        let other = backups + "/notes.sqlite3.partial"
        for path in [old, fresh, other] { #expect(FileManager.default.createFile(atPath: path, contents: Data(count: 4096))) }
        for path in [old, other] {
            try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -3600)], ofItemAtPath: path)
        }
        let written = Mutex<Result<StoreBackup, StorageError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        store.backUp(into: backups) { result in
            written.withLock { $0 = result }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        let backup = try #require(try written.withLock { $0 }?.get())
        let files = Set(try FileManager.default.contentsOfDirectory(atPath: backups))
        #expect(files == [(backup.path as NSString).lastPathComponent, (fresh as NSString).lastPathComponent, "notes.sqlite3.partial"])
    }

    /// One copy at a time; and a store closed while a copy is under way leaves no partial file,
    /// and says the copy failed.
    @Test func aSecondBackupMeanwhileFailsAndAStoreClosedDuringOneLeavesNoPartialCopy() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try open()
        try fillWithSessions(store, count: 1000)
        let backups = directory + "/backups"
        let results = Mutex<[Result<StoreBackup, StorageError>]>([])
        let done = DispatchSemaphore(value: 0)
        for _ in 1...2 {
            store.backUp(into: backups) { result in
                results.withLock { $0.append(result) }
                done.signal()
            }
        }
        // The first copy takes about 80 turns of the writer: the second is asked at its first,
        // and the close comes long before its last.
        #expect(done.wait(timeout: .now() + 10) == .success)
        store.close()
        #expect(done.wait(timeout: .now() + 10) == .success)
        let said = results.withLock { $0 }.map { result -> String in
            switch result {
            case .success: "written"
            case .failure(let error): "\(error)"
            }
        }
        #expect(said.count == 2)
        #expect(said.first?.contains("a backup is already under way") == true, "\(said)")
        #expect(said.last?.contains("the store closed before the backup was whole") == true, "\(said)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: backups) == [])
    }

    /// A copy that cannot be written fails, saying where and why, and the store goes on.
    @Test func aBackupThatCannotBeWrittenFailsSayingWhy() throws {
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try open()
        defer { store.close() }
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        #expect(FileManager.default.createFile(atPath: directory + "/file", contents: Data()))
        let written = Mutex<Result<StoreBackup, StorageError>?>(nil)
        let done = DispatchSemaphore(value: 0)
        store.backUp(into: directory + "/file/backups") { result in
            written.withLock { $0 = result }
            done.signal()
        }
        #expect(done.wait(timeout: .now() + 10) == .success)
        #expect(throws: StorageError.unavailable("cannot create the backup directory \(directory)/file/backups: \(directory)/file: Not a directory")) {
            try written.withLock { $0 }?.get()
        }
        try commit(store, [.transaction(id: "a", transaction(version: 1, events: 1...1))])
    }

    /// Sessions of 20 KB of state each: a store the copy needs turns of the writer for, about
    /// one for every 50.
    func fillWithSessions(_ store: SQLiteSessionStore, count: Int = 200) throws {
        let state = #"{"text":""# + String(repeating: "x", count: 20_000) + #""}"#
        for batch in 0..<(count / 20) {
            try commit(store, (0..<20).map { .create(record("s\(batch * 20 + $0)"), snapshot(version: 0, last: 0, state: state)) })
        }
    }

    @Test(.enabled(if: geteuid() == 0, "mounting a small tmpfs needs root"))
    func aFullDiskFailsTheBatchAndTheStoreRecoversOnceThereIsRoom() throws {
        try mountSmallDisk()
        defer { unmountSmallDisk() }
        let store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        let filler = fillDisk()
        let big = "\"" + String(repeating: "y", count: 200_000) + "\""
        #expect(throws: StorageError.self) {
            try commit(store, [.transaction(id: "a", transaction(version: 1, events: 1...1, data: big))])
        }
        #expect(store.statistics().failedCommits >= 1)

        try FileManager.default.removeItem(atPath: filler)
        try commit(store, [.transaction(id: "a", transaction(version: 1, events: 1...1))])
        store.close()
        let a = try #require(try open().loadAll().sessions.first)
        #expect(a.transactions == [transaction(version: 1, events: 1...1)], "the failed batch left nothing behind")
    }

    /// A store navd may not write to is refused with words that say so, not only SQLite's,
    /// which read like a failing disk.
    @Test(.enabled(if: geteuid() == 0, "mounting a small tmpfs needs root"))
    func aStoreOnAReadOnlyFileSystemIsRefusedSayingSo() throws {
        try mountSmallDisk()
        defer { unmountSmallDisk() }
        let store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        store.close()
        try run("/bin/mount", "-o", "remount,ro", directory)
        #expect { try open() } throws: { error in
            "\(error)".contains("navd cannot write to") && "\(error)".contains("Read-only file system")
        }
    }

    /// A store on a full disk still opens and reads (navd starts, serves and answers writes
    /// 503 until there is room): opening writes nothing it cannot do without. The mark that
    /// says a process has the store open then goes with the first commit that fits.
    @Test(.enabled(if: geteuid() == 0, "mounting a small tmpfs needs root"))
    func aFullDiskStillOpensAndMarksTheStoreOpenWithTheFirstCommitThatFits() throws {
        try mountSmallDisk()
        defer { unmountSmallDisk() }
        var store = try open()
        try commit(store, [.create(record("a"), snapshot(version: 0, last: 0))])
        try commit(store, [.idle(seconds: ["a": 0])])
        store.close()
        let filler = fillDisk()
        // Full to the last page, so the open could not have marked the store open itself.
        #expect(!FileManager.default.createFile(atPath: directory + "/probe", contents: Data(count: 4096)), "the disk still has room")

        store = try open()
        let loaded = try store.loadAll().sessions
        #expect(loaded.map(\.record.id) == ["a"])
        #expect(loaded.first?.idleSeconds != nil, "the last process stopped cleanly")
        let big = "\"" + String(repeating: "y", count: 200_000) + "\""
        #expect(throws: StorageError.self) {
            try commit(store, [.transaction(id: "a", transaction(version: 1, events: 1...1, data: big))])
        }
        try FileManager.default.removeItem(atPath: filler)
        try commit(store, [.transaction(id: "a", transaction(version: 1, events: 1...1))])
        // Gone without writing its idle times, as in a crash: what it did since is not known.
        store.close()
        let again = try open().loadAll().sessions
        #expect(again.first?.transactions == [transaction(version: 1, events: 1...1)])
        #expect(again.map(\.idleSeconds) == [nil], "the commit marked the store open")
    }

    // MARK: - Helpers

    /// The store's directory on a tmpfs of 4 MiB, so a test can fill it.
    func mountSmallDisk() throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try run("/bin/mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", directory)
    }

    func unmountSmallDisk() {
        _ = try? run("/bin/umount", directory)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Fills what is left of the small disk, so the next commit's log pages do not fit; the
    /// file to remove to make room again.
    func fillDisk() -> String {
        let filler = (directory as NSString).appendingPathComponent("filler")
        _ = try? run("/bin/dd", "if=/dev/zero", "of=\(filler)", "bs=64k", "count=100")
        return filler
    }

    /// A store as navd wrote it before the journal: transactions and events in two tables.
    func writeVersionOneStore(_ record: SessionRecord, _ state: SessionSnapshot, _ after: SessionTransaction) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let old = try SQLiteDatabase(path: (directory as NSString).appendingPathComponent("navd.sqlite3"))
        try old.execute("""
            PRAGMA journal_mode = WAL;
            CREATE TABLE sessions (id TEXT PRIMARY KEY, token_hash BLOB NOT NULL, feature TEXT NOT NULL, created REAL NOT NULL,
                version INTEGER NOT NULL, last_sequence INTEGER NOT NULL, next_serial INTEGER NOT NULL, state BLOB NOT NULL,
                tree BLOB NOT NULL, extras BLOB NOT NULL);
            CREATE TABLE transactions (ordinal INTEGER PRIMARY KEY, session TEXT NOT NULL, version INTEGER NOT NULL,
                last_sequence INTEGER NOT NULL, next_serial INTEGER NOT NULL, patch BLOB NOT NULL, extras BLOB);
            CREATE INDEX transactions_by_session ON transactions (session, ordinal);
            CREATE TABLE events (session TEXT NOT NULL, sequence INTEGER NOT NULL, kind TEXT NOT NULL, data BLOB NOT NULL,
                UNIQUE (session, sequence));
            CREATE TABLE probes (id INTEGER PRIMARY KEY CHECK (id = 1), written REAL NOT NULL);
            PRAGMA application_id = \(SQLiteSchema.applicationID);
            PRAGMA user_version = 1;
            """)
        try old.run("INSERT INTO sessions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [.text(record.id), .blob(record.tokenHash), .text(record.feature), .real(record.created), .integer(state.version),
                     .integer(state.lastSequence), .integer(state.nextSerial), .blob(state.state), .blob(state.tree), .blob(state.extras)])
        try old.run("INSERT INTO transactions (session, version, last_sequence, next_serial, patch) VALUES (?, ?, ?, ?, ?)",
                    [.text(record.id), .integer(after.version), .integer(after.lastSequence), .integer(after.nextSerial), .blob(after.statePatch)])
        for sequence in 1...after.lastSequence {
            try old.run("INSERT INTO events VALUES (?, ?, 'state', ?)", [.text(record.id), .integer(sequence), .blob(Array(#"{"count":1}"#.utf8))])
        }
        // An event a v1 store could hold but JSON cannot: left behind, the rest upgraded.
        try old.run("INSERT INTO events VALUES (?, 99, 'state', x'ff')", [.text(record.id)])
    }

    func rowCounts() throws -> [Int] {
        let database = try SQLiteDatabase(path: (directory as NSString).appendingPathComponent("navd.sqlite3"))
        return try ["sessions", "journal"].map { try database.integer("SELECT count(*) FROM \($0)") }
    }

    @discardableResult
    func run(_ executable: String, _ arguments: String...) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw StorageError.unavailable("\(executable) \(arguments.joined(separator: " ")) exited \(process.terminationStatus)")
        }
        return process.terminationStatus
    }
}
