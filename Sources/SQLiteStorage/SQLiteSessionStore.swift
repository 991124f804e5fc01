import CSQLite
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SessionStorage
import Synchronization

/// Sessions in an embedded SQLite database: `navd.sqlite3` in the data directory.
///
/// Acknowledged means durable: the database is in WAL mode with `synchronous=FULL`, so a
/// commit returns only once the log is synced. One writer (a serial queue) commits whatever
/// arrived while the previous commit was syncing in one transaction, so requests share a sync
/// instead of queueing for one each. The file is held with an exclusive lock: a second navd
/// on the same directory is refused instead of corrupting the first one's sessions.
public final class SQLiteSessionStore: BackupStorage {
    /// The open database and what is kept beside it, behind one lock.
    private struct Open {
        let database: SQLiteDatabase
        var journal = JournalIndex()
        /// The store's clock as it was kept, and when this process read it.
        let clockKept: Double
        let clockRead = ContinuousClock.now
        /// Whether the process before wrote its sessions' idle times as it stopped (rather than
        /// crashed, or failed to write them): only then are they known.
        let closedCleanly: Bool
        /// Whether the file says this process has it open (`closed` cleared), so that a crash
        /// is known as one at the next start. Cleared at open, or, when the disk had no room
        /// then, by the first commit, before anything this process does is durable.
        var markedOpen: Bool

        /// The file opened, and its log (`-wal`) as first seen beside it, by device and inode: a
        /// commit to either after it was removed or replaced would be acknowledged and then lost
        /// at the next start.
        let file: FileIdentity?
        var log: FileIdentity?
        /// A copy under way (`backUp`), one at a time.
        var backup: RunningBackup?

        /// Whether `path` and its log still name the files opened (one `stat` each).
        func filesInPlace(_ path: String) -> Bool {
            (file == nil || FileIdentity(path) == file) && (log == nil || FileIdentity(path + "-wal") == log)
        }

        /// The store's clock now: it goes on from where the last process kept it.
        var clock: Double { clockKept + (ContinuousClock.now - clockRead).seconds }
    }

    public let path: String
    /// Whether this open made the store: the data directory held none (a first start, or a
    /// volume that was not there), said in the `listening` line so that an empty start shows.
    public let wasCreated: Bool
    private let retention: EventRetention
    private let open: Mutex<Open?>
    private let writer: GroupCommit
    /// Where a copy's pages are pushed to disk, and the copy synced, away from the writer.
    private let backupWriter = DispatchQueue(label: "navd.store.backup")
    private let counters = Mutex(StorageStatistics())

    /// Free pages worth giving back to the file system in one go, after sessions were deleted.
    private static let vacuumThreshold = 1024

    /// `name` in `directory`, however the directory was written (`/srv/navd` or `/srv/navd/`).
    private static func entry(_ name: String, in directory: String) -> String {
        directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    /// `mkdir -p` with mode 0700 for what it creates: `nil`, or what the system said about
    /// which part ("/srv/navd: Permission denied").
    private static func makeDirectories(_ directory: String) -> String? {
        var prefix = directory.hasPrefix("/") ? "/" : ""
        for component in directory.split(separator: "/") {
            prefix += prefix.isEmpty || prefix.hasSuffix("/") ? component : "/" + component
            if mkdir(prefix, 0o700) == 0 { continue }
            let error = errno
            var info = stat()
            guard error == EEXIST, stat(prefix, &info) == 0, info.st_mode & S_IFMT == S_IFDIR else {
                return "\(prefix): \(String(cString: strerror(error == EEXIST ? ENOTDIR : error)))"
            }
        }
        return nil
    }

    /// Opens (or creates) the store in `directory`; refuses a file that is not navd's, one
    /// written by a newer navd, and one another process holds. `completionRound` runs the
    /// completions of each commit together (`GroupCommit.CompletionRound`).
    public init(directory: String, retention: EventRetention,
                completionRound: @escaping GroupCommit.CompletionRound = { $0() }) throws(StorageError) {
        writer = GroupCommit(label: "navd.store.writer", completionRound: completionRound)
        if let failure = Self.makeDirectories(directory) {
            throw .cannotOpen("cannot create the data directory \(directory): \(failure)")
        }
        path = Self.entry("navd.sqlite3", in: directory)
        self.retention = retention
        // Held until the store is open and locked: two navd starting on one new directory at once
        // would otherwise each unlink the other's half-made store, and two on one store could
        // each refuse the other. One opens the store; the other then finds it in use.
        let folder = systemOpen(directory, O_RDONLY)
        defer { if folder >= 0 { systemClose(folder) } }  // which releases the lock
        if folder >= 0 { _ = flock(folder, LOCK_EX) }
        do {
            wasCreated = try Self.createIfAbsent(path, in: folder)
            let database = try SQLiteDatabase(path: path)
            let file = FileIdentity(path)
            try Self.prepare(database, path: path)
            var clock = 0.0
            var closed = false
            try database.run("SELECT seconds, closed FROM clock") { row in
                clock = row.real(0)
                closed = row.integer(1) != 0
            }
            // Until this process closes it: a crash is known as one at the next start. A full
            // disk must not keep navd from starting (it reads, and writes once there is room).
            let markedOpen = closed ? try Self.markOpen(database) : true
            self.open = Mutex(Open(database: database, clockKept: clock, closedCleanly: closed, markedOpen: markedOpen,
                                   file: file, log: FileIdentity(path + "-wal")))
        } catch let failure as SQLiteDatabase.Failure {
            if failure.isBusy { throw .cannotOpen("\(path) is in use by another process") }
            // SQLite's words for a store it may not write ("disk I/O error") read like a failing
            // disk; most often it is the permissions, or a file system mounted read-only.
            let places: [String] = [path, directory]
            let unwritable = places.first { access($0, W_OK) != 0 }
            throw .cannotOpen("\(path): \(failure)" + (unwritable.map { "; navd cannot write to \($0): \(String(cString: strerror(errno)))" } ?? ""))
        } catch let error as StorageError {
            throw error
        } catch {
            throw .cannotOpen("\(path): \(error)")
        }
    }

    /// A new store is made under another name and moved into place whole, so a file named
    /// `navd.sqlite3` is always a store navd finished making: an empty one (a restore that
    /// failed) is refused, not taken for a new store that would start with no sessions, silently.
    /// `folder`: the directory, open, for its entry to be synced (-1 if it could not be opened).
    /// True when it made the store.
    private static func createIfAbsent(_ path: String, in folder: Int32) throws -> Bool {
        var info = stat()
        if stat(path, &info) == 0 {
            if info.st_mode & S_IFMT == S_IFREG && info.st_size == 0 {
                throw StorageError.cannotOpen("\(path) is empty (0 bytes), so it is no navd session store: restore it, or remove it to start with no sessions")
            }
            return false
        }
        // Anything but its absence is for the open to report, with SQLite's words.
        guard errno == ENOENT else { return false }
        // A log without its database (a restore that left the file out, a file removed by hand):
        // SQLite would replay it onto the new store, which would start without its sessions and
        // with pages that are not its own.
        if stat(path + "-wal", &info) == 0 && info.st_size > 0 {
            throw StorageError.cannotOpen("\(path)-wal is there without \(path), so the store is incomplete: restore the file with its log, or remove the log to start with no sessions")
        }
        let fresh = newStore(for: path)
        // Made here, readable by navd alone, whatever the umask or the directory's mode (a volume
        // made beforehand): SQLite keeps an existing file's mode, and gives its log the same.
        // A failure here is SQLite's to report, in the open's words.
        let file = systemOpen(fresh, O_RDWR | O_CREAT | O_EXCL, 0o600)
        if file >= 0 { systemClose(file) }
        do {
            let database = try SQLiteDatabase(path: fresh)
            try prepare(database, path: fresh)
        }  // Closed here, its log folded into the file and synced.
        guard rename(fresh, path) == 0 else {
            throw StorageError.cannotOpen("\(path): cannot move the new store into place: \(String(cString: strerror(errno)))")
        }
        // The directory's entry too: after a crash now there is the store, not nothing.
        if folder >= 0 { fsync(folder) }
        return true
    }

    /// Why this navd cannot serve the store at `path`, whose `application_id` and `user_version`
    /// are these: not navd's, a newer navd's, or of a schema it cannot upgrade; nil when it can.
    private static func unreadable(_ path: String, application: Int, version: Int) -> StorageError? {
        if application != SQLiteSchema.applicationID { return .cannotOpen("\(path) is not a navd session store") }
        if version > SQLiteSchema.version {
            return .cannotOpen("\(path) was written by a newer navd (schema \(version); this navd reads \(SQLiteSchema.version))")
        }
        if version < SQLiteSchema.version, SQLiteSchema.migrations(from: version) == nil {
            return .cannotOpen("\(path) has schema \(version), which this navd cannot upgrade")
        }
        return nil
    }

    /// A store is made under `path` + `.new` and moved into place whole: that name, with
    /// whatever a half-made store left beside it removed.
    private static func newStore(for path: String) -> String {
        discardNewStore(for: path)
        return path + ".new"
    }

    /// Removes a store made under `path` + `.new` that was not moved into place, with its files.
    private static func discardNewStore(for path: String) {
        let fresh = path + ".new"
        for leftover in [fresh, fresh + "-wal", fresh + "-shm", fresh + "-journal"] { unlink(leftover) }
    }

    /// The mark that a process has the store open: cleared `closed`.
    private static let openMark = "UPDATE clock SET closed = 0"

    /// Clears `closed`; false when the disk has no room for it.
    private static func markOpen(_ database: SQLiteDatabase) throws(SQLiteDatabase.Failure) -> Bool {
        do throws(SQLiteDatabase.Failure) {
            try database.run(openMark)
            return true
        } catch {
            guard error.isDiskProblem else { throw error }
            return false
        }
    }

    private static func prepare(_ database: SQLiteDatabase, path: String) throws {
        // Before anything reads the file: no waiting on another process, and an exclusive lock
        // held for the connection's life (so WAL needs no shared memory).
        try database.execute("""
            PRAGMA busy_timeout = 0;
            PRAGMA locking_mode = EXCLUSIVE;
            """)
        // Incremental vacuum takes effect only before the first table exists: set on a new file
        // alone, since setting it writes, and a full disk must not keep a store from opening.
        if try database.integer("SELECT count(*) FROM sqlite_schema") == 0 {
            try database.execute("PRAGMA auto_vacuum = INCREMENTAL")
        }
        let mode = try database.text("PRAGMA journal_mode = WAL")
        guard mode.lowercased() == "wal" else { throw StorageError.cannotOpen("\(path): cannot use write-ahead logging (journal mode \(mode))") }
        try database.execute("""
            PRAGMA synchronous = FULL;
            PRAGMA journal_size_limit = 8388608;
            PRAGMA cache_size = -16384;
            BEGIN EXCLUSIVE;
            """)
        do {
            let application = try database.integer("PRAGMA application_id")
            let version = try database.integer("PRAGMA user_version")
            let tables = try database.integer("SELECT count(*) FROM sqlite_schema")
            if application == 0 && version == 0 && tables == 0 {
                try database.execute(SQLiteSchema.create)
            } else if let refusal = unreadable(path, application: application, version: version) {
                throw refusal
            } else if version < SQLiteSchema.version, let migration = SQLiteSchema.migrations(from: version) {
                try database.execute(migration)
            }
            // A copy's first open: its sessions go on from well past where the store it was
            // taken of may have gone since.
            if try database.integer("SELECT copied FROM clock") != 0 {
                try database.execute(SQLiteSchema.continueFromCopy(secondsSince1970: Int(time(nil))))
            }
            // Rows an older navd kept for sessions deleted while their last writes were on the way.
            try database.execute("""
                DELETE FROM journal WHERE session NOT IN (SELECT id FROM sessions);
                COMMIT;
                """)
        } catch {
            try? database.execute("ROLLBACK")
            throw error
        }
    }

    // MARK: - Loading

    public func load(within memory: Int, perSession: Int, _ each: (StoredSession) -> Void) throws(StorageError) -> [String] {
        // The journal first, in order: it is where the index of its rows comes from.
        var history = try open.withLock { open -> Result<[String: History], StorageError> in
            guard let database = open?.database else { return .failure(.unavailable("the store is closed")) }
            return Self.reading { () throws(SQLiteDatabase.Failure) in
                try Self.readJournal(from: database, eventBytes: Self.roomForEvents(in: database, within: memory, perSession: perSession))
            }.map { history, journal in
                open?.journal = journal
                return history
            }
        }.get()
        let retention = retention
        let failed = try SessionPage.readAll({ cursor throws(StorageError) in
            try open.withLock { open -> Result<SessionPage, StorageError> in
                guard let database = open?.database else { return .failure(.unavailable("the store is closed")) }
                return Self.reading { () throws(SQLiteDatabase.Failure) in
                    try Self.page(after: cursor, from: database, history: &history, retention: retention,
                                  idleKnown: open?.closedCleanly == true)
                }
            }.get()
        }, each)
        // Rows the pages of text ids leave out, which navd never writes (an id that is NULL,
        // empty, or a blob: another program's edit): reported by their row number, never passed
        // over. Found through the id's index, so a start does not scan the table for them.
        let strays = try open.withLock { open -> Result<[String], StorageError> in
            guard let database = open?.database else { return .failure(.unavailable("the store is closed")) }
            return Self.reading { () throws(SQLiteDatabase.Failure) in
                var rows: [Int] = []
                try database.run("SELECT rowid FROM sessions WHERE id IS NULL OR id = '' OR id >= x''") { row in
                    rows.append(row.integer(0))
                }
                return rows.sorted().map { "(row \($0) of sessions, without an id)" }
            }
        }.get()
        // The pages read for recovery are not needed again: the sessions live in memory.
        open.withLock { open in _ = try? open?.database.execute("PRAGMA shrink_memory") }
        return failed + strays
    }

    /// What reading came to: a failure that is the disk's makes the store unavailable, any
    /// other means the file cannot be read.
    private static func reading<Value>(_ body: () throws(SQLiteDatabase.Failure) -> Value) -> Result<Value, StorageError> {
        do throws(SQLiteDatabase.Failure) {
            return .success(try body())
        } catch {
            return .failure(error.isDiskProblem ? .unavailable(error.description) : .cannotOpen(error.description))
        }
    }

    /// What the journal holds for one session, as a start reads it.
    private struct History {
        var transactions: [SessionTransaction] = []
        var events: [StoredEvent] = []
        /// A row whose events are not JSON, which navd did not write: the session fails alone.
        var unreadable = false
    }

    /// What `memory` leaves for kept events once every session's state is back: each counted as
    /// its stored state and `perSession`, what the sessions' budget charges it at the least.
    private static func roomForEvents(in database: SQLiteDatabase, within memory: Int, perSession: Int) throws(SQLiteDatabase.Failure) -> Int {
        guard memory < .max else { return .max }
        let states = try database.integer("SELECT coalesce(sum(length(state)), 0) + count(*) * ? FROM sessions", [.integer(perSession)])
        return max(0, memory - states)
    }

    /// Every session's journal rows, in order, and the index of them. The rows a restart
    /// replays (past the session's snapshot) come with their patches and events; the others
    /// only with their events, and those only as far as `eventBytes` has room, newest rows
    /// first: the journal may keep an event buffer's worth for every session, far more than
    /// memory holds.
    private static func readJournal(from database: SQLiteDatabase, eventBytes: Int) throws(SQLiteDatabase.Failure) -> ([String: History], JournalIndex) {
        var history: [String: History] = [:]
        var rows: [String: [JournalIndex.Row]] = [:]
        var sizes: [(ordinal: Int, eventBytes: Int)] = []
        try database.run("""
            SELECT journal.session, journal.version, journal.last_sequence, journal.next_serial,
                   CASE WHEN journal.version > sessions.version THEN journal.patch END, journal.extras,
                   json_valid(journal.events), journal.ordinal, journal.bytes_through, journal.event_bytes,
                   journal.version > sessions.version, sessions.id IS NOT NULL
            FROM journal LEFT JOIN sessions ON sessions.id = journal.session ORDER BY journal.ordinal
            """) { row in
            let id = row.text(0)
            let lastSequence = row.integer(2)
            rows[id, default: []].append(.init(ordinal: Int64(row.integer(7)), lastSequence: lastSequence, bytesThrough: row.integer(8)))
            // A row of no session (another program's edit) is never read for its events.
            if row.integer(11) != 0 { sizes.append((row.integer(7), row.integer(9))) }
            if row.integer(6) == 0 { history[id, default: History()].unreadable = true }
            // Rows at or below the snapshot are kept only for their events.
            guard row.integer(10) != 0 else { return }
            history[id, default: History()].transactions.append(SessionTransaction(
                version: row.integer(1), lastSequence: lastSequence, nextSerial: row.integer(3),
                statePatch: row.blob(4), events: [], extras: row.isNull(5) ? nil : row.blob(5)))
        }
        // The oldest row whose events are read: from there on, the newest rows' events fit.
        var first = Int.max
        var total = 0
        for size in sizes.reversed() {
            // A size only a damaged row could have stops the reading there, as too large would.
            let (sum, overflow) = total.addingReportingOverflow(max(0, size.eventBytes))
            guard !overflow, sum <= eventBytes else { break }
            total = sum
            first = size.ordinal
        }
        sizes = []
        // Each session's rows read are its newest (those from `first` on, and those it replays,
        // which are its last): its kept events stay unbroken.
        try database.run("""
            SELECT journal.session, event.value ->> 0, event.value ->> 1, event.value -> 2
            FROM journal JOIN sessions ON sessions.id = journal.session, json_each(journal.events) AS event
            WHERE CASE WHEN journal.ordinal >= ? OR journal.version > sessions.version THEN json_valid(journal.events) ELSE 0 END
            """, [.integer(first)]) { row in
            // In no particular order: each session's events are sorted by id when it is loaded.
            history[row.text(0), default: History()].events.append(StoredEvent(sequence: row.integer(1), kind: row.text(2), data: row.blob(3)))
        }
        return (history, JournalIndex(rows: rows))
    }

    /// `idleKnown`: whether the idle times recorded are the sessions' (every use was recorded
    /// before the last stop); after a crash they are not told. Nor is a use recorded outside the
    /// store's clock, which only a damaged row has: taken as told, it could expire every session
    /// at once.
    private static func page(after cursor: String, from database: SQLiteDatabase, history: inout [String: History],
                             retention: EventRetention, idleKnown: Bool) throws(SQLiteDatabase.Failure) -> SessionPage {
        var page = SessionPage()
        try database.run("""
            SELECT id, token_hash, feature, created, version, last_sequence, next_serial, state, tree, extras,
                   CASE WHEN ? AND uses.at BETWEEN 0 AND (SELECT seconds FROM clock) THEN (SELECT seconds FROM clock) - uses.at END
            FROM sessions LEFT JOIN uses ON uses.session = sessions.id
            WHERE id > ? AND typeof(id) = 'text' ORDER BY id LIMIT \(SessionPage.size)
            """, [.integer(idleKnown ? 1 : 0), .text(cursor)]) { row in
            let id = row.text(0)
            page.last = id
            let tokenHash = row.blob(1)
            let journal = history.removeValue(forKey: id) ?? History()
            guard tokenHash.count == TokenHash.byteCount, !journal.unreadable else {
                page.failed.append(id)
                return
            }
            let record = SessionRecord(id: id, tokenHash: tokenHash, feature: row.text(2), created: row.real(3))
            let snapshot = SessionSnapshot(version: row.integer(4), lastSequence: row.integer(5), nextSerial: row.integer(6),
                                           state: row.blob(7), tree: row.blob(8), extras: row.blob(9))
            // `readJournal` kept only the transactions past this snapshot.
            page.sessions.append(StoredSession(record: record, snapshot: snapshot, transactions: journal.transactions,
                                               events: journal.events.sorted { $0.sequence < $1.sequence },
                                               idleSeconds: row.isNull(10) ? nil : row.real(10), retention: retention))
        }
        return page
    }

    // MARK: - Committing

    public func commit(_ writes: [StoreWrite], admissible: @escaping @Sendable () -> Bool,
                       completion: @escaping @Sendable (Result<Void, StorageError>) -> Void) {
        writer.submit(writes, admissible: admissible, completion: completion,
                      commitTogether: { [self] requests in commitTogether(requests) })
    }

    /// Every request is written: one node owns every session, so nothing is fenced.
    private func commitTogether(_ requests: [[StoreWrite]]) -> Result<[GroupCommit.Verdict], StorageError> {
        let started = ContinuousClock.now
        let result = open.withLock { open -> Result<[GroupCommit.Verdict], StorageError> in
            guard var current = open.take() else { return .failure(.unavailable("the store is closed")) }
            guard current.filesInPlace(path) else {
                open = current
                return .failure(.unavailable("\(path) or its log was removed or replaced while navd had it open: nothing more is written to it (restore the files, or restart navd to start with the store as it is)"))
            }
            defer { open = current }
            do throws(SQLiteDatabase.Failure) {
                try current.database.run("BEGIN IMMEDIATE")
                do throws(SQLiteDatabase.Failure) {
                    if !current.markedOpen { try current.database.run(Self.openMark) }
                    for request in requests {
                        for write in request { try apply(write, to: &current) }
                    }
                    try current.database.run("COMMIT")
                } catch {
                    try? current.database.execute("ROLLBACK")
                    current.journal.discardChanges()
                    throw error
                }
                current.journal.keepChanges()
                current.markedOpen = true
                if current.log == nil { current.log = FileIdentity(path + "-wal") }
                if giveBackFreePages(current.database) { writer.onWriter { [self] in giveBackMoreFreePages() } }
                return .success(Array(repeating: .written, count: requests.count))
            } catch {
                return .failure(.unavailable(error.description))
            }
        }
        record(result, requests: requests.count, seconds: (ContinuousClock.now - started).seconds)
        return result
    }

    private func apply(_ write: StoreWrite, to open: inout Open) throws(SQLiteDatabase.Failure) {
        let database = open.database
        switch write {
        case .create(let record, let snapshot):
            try database.run("""
                INSERT INTO sessions (id, token_hash, feature, created, version, last_sequence, next_serial, state, tree, extras)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, [.text(record.id), .blob(record.tokenHash), .text(record.feature), .real(record.created)] + Self.values(snapshot))
            try database.run("INSERT INTO uses (session, at) VALUES (?, ?)", [.text(record.id), .real(open.clock)])
        case .transaction(let id, let transaction):
            // A batch still on its way when its session was deleted: nothing of it is kept, on
            // disk or here. Asked only of a session with no rows, which a live one rarely is.
            if !open.journal.hasRows(id) {
                guard try database.integer("SELECT count(*) FROM sessions WHERE id = ?", [.text(id)]) > 0 else { return }
            }
            let eventBytes = transaction.events.reduce(0) { $0 + $1.data.count }
            let bytesThrough = open.journal.bytesThrough(of: id) + eventBytes
            try database.run("""
                INSERT INTO journal (session, version, last_sequence, next_serial, patch, extras, events, event_bytes, bytes_through)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, [.text(id), .integer(transaction.version), .integer(transaction.lastSequence), .integer(transaction.nextSerial),
                      .blob(transaction.statePatch), transaction.extras.map { .blob($0) } ?? .null,
                      .utf8(Self.eventArray(transaction.events)), .integer(eventBytes), .integer(bytesThrough)])
            open.journal.append(.init(ordinal: database.lastInsertedRow, lastSequence: transaction.lastSequence, bytesThrough: bytesThrough), of: id)
        case .snapshot(let id, let snapshot):
            try database.run("""
                UPDATE sessions SET version = ?, last_sequence = ?, next_serial = ?, state = ?, tree = ?, extras = ? WHERE id = ?
                """, Self.values(snapshot) + [.text(id)])
            // After a snapshot, the rows it covers are needed only for their events.
            try deleteRows(open.journal.trim(id, eventsThrough: snapshot.lastSequence, keeping: retention), of: id, from: database)
        case .fence:
            // Never sent to a store of one node (it hands out no epochs); nothing to check.
            break
        case .probe:
            try database.run("INSERT OR REPLACE INTO probes (id, written) VALUES (1, julianday('now'))")
        case .idle(let seconds):
            // Only sessions still here: one deleted meanwhile stays gone. In the same
            // transaction, the clock they are counted by and the mark that they are the
            // process's last word.
            let now = open.clock
            for (id, idle) in seconds {
                try database.run("UPDATE uses SET at = ? WHERE session = ?", [.real(now - idle), .text(id)])
            }
            try database.run("UPDATE clock SET seconds = ?, closed = 1", [.real(now)])
        case .delete(let id, _):
            try database.run("DELETE FROM sessions WHERE id = ?", [.text(id)])
            try database.run("DELETE FROM uses WHERE session = ?", [.text(id)])
            try deleteRows(open.journal.remove(id), of: id, from: database)
        }
    }

    /// Deletes `id`'s rows by ordinal; a row that is someone else's (an ordinal reused after a
    /// commit the disk failed halfway) is left alone.
    private func deleteRows(_ ordinals: [Int64], of id: String, from database: SQLiteDatabase) throws(SQLiteDatabase.Failure) {
        for ordinal in ordinals {
            try database.run("DELETE FROM journal WHERE ordinal = ? AND session = ?", [.integer(Int(ordinal)), .text(id)])
        }
    }

    /// A batch's events as the journal keeps them: `[[sequence, "kind", data], …]`. `data` is
    /// the JSON the server sent; the kind is one of the protocol's event names.
    static func eventArray(_ events: [StoredEvent]) -> [UInt8] {
        var out: [UInt8] = [UInt8(ascii: "[")]
        out.reserveCapacity(events.reduce(2) { $0 + $1.data.count + $1.kind.utf8.count + 24 })
        for (index, event) in events.enumerated() {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            out.append(UInt8(ascii: "["))
            out.append(contentsOf: String(event.sequence).utf8)
            out.append(contentsOf: #",""#.utf8)
            for byte in event.kind.utf8 {
                // Event names are plain words; anything else is escaped so the array stays JSON.
                if byte < 0x20 || byte == UInt8(ascii: "\\") || byte == UInt8(ascii: "\"") {
                    out.append(contentsOf: "\\u00".utf8)
                    out.append(contentsOf: [byte >> 4, byte & 0xF].map { $0 < 10 ? $0 + 48 : $0 + 87 })
                } else {
                    out.append(byte)
                }
            }
            out.append(contentsOf: #"","#.utf8)
            out.append(contentsOf: event.data)
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "]"))
        return out
    }

    /// After deletions the file keeps its pages, and new rows reuse them: under steady load
    /// (events trimmed, events added) that is what should happen. Only when a quarter of the
    /// file is free, because live data shrank, do pages go back to the file system, a few at a
    /// time so no commit waits long behind it. True when it gave some back (there may be more):
    /// a file that does not shrink this way (not in incremental mode) stops the caller at once.
    private func giveBackFreePages(_ database: SQLiteDatabase) -> Bool {
        guard let free = try? database.integer("PRAGMA freelist_count"), free >= Self.vacuumThreshold,
              let pages = try? database.integer("PRAGMA page_count"), free * 4 >= pages,
              (try? database.execute("PRAGMA incremental_vacuum(\(Self.vacuumThreshold))")) != nil,
              let left = try? database.integer("PRAGMA freelist_count") else { return false }
        return left < free
    }

    /// The rest of what a commit began to give back, a step at a time between commits, so an
    /// idle server shrinks too, not only one that goes on committing.
    private func giveBackMoreFreePages() {
        let more = open.withLock { open -> Bool in
            guard let database = open?.database else { return false }
            if giveBackFreePages(database) { return true }
            // The file shrinks when the log is folded into it; an idle server would not get there.
            try? database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            return false
        }
        if more { writer.onWriter { [self] in giveBackMoreFreePages() } }
    }

    private static func values(_ snapshot: SessionSnapshot) -> [SQLiteValue] {
        [.integer(snapshot.version), .integer(snapshot.lastSequence), .integer(snapshot.nextSerial),
         .blob(snapshot.state), .blob(snapshot.tree), .blob(snapshot.extras)]
    }

    // MARK: - Backing up

    /// A copy being written: the copy itself, the file it goes to until it is whole (and a
    /// descriptor of it, to push its pages out as they come), the name it then takes, and whom
    /// to tell.
    private struct RunningBackup {
        let copy: SQLiteBackup
        let partial: String
        let file: Int32
        let target: String
        let completion: @Sendable (Result<StoreBackup, StorageError>) -> Void
    }

    /// Pages copied per turn of the writer: a few milliseconds, so a commit that waits behind
    /// one waits about as long as behind a busy commit.
    private static let backupStepPages: Int32 = 256

    /// A partial copy untouched for this long was left by a process that died while making it:
    /// one being made is written every few milliseconds.
    private static let abandonedAfterSeconds = 600

    public func backUp(into directory: String, completion: @escaping @Sendable (Result<StoreBackup, StorageError>) -> Void) {
        writer.onWriter { [self] in
            let started = open.withLock { open -> StorageError? in
                guard let database = open?.database else { return .unavailable("the store is closed") }
                guard open?.backup == nil else { return .unavailable("a backup is already under way") }
                if let failure = Self.makeDirectories(directory) {
                    return .unavailable("cannot create the backup directory \(directory): \(failure)")
                }
                Self.removeAbandonedCopies(in: directory)
                let target = Self.unusedBackupPath(in: directory)
                let partial = target + ".partial"
                // Made here, readable by navd alone: SQLite keeps the mode of a file it opens, and
                // the copy holds every session's state.
                let file = systemOpen(partial, O_RDWR | O_CREAT | O_EXCL, 0o600)
                guard file >= 0 else { return .unavailable("\(partial): \(String(cString: strerror(errno)))") }
                do throws(SQLiteDatabase.Failure) {
                    let destination = try SQLiteDatabase(path: partial)
                    // Pushed out a piece at a time away from the writer (`continueBackup`), and synced
                    // whole at the end: a sync here would hold commits up.
                    try destination.execute("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")
                    open?.backup = RunningBackup(copy: try SQLiteBackup(from: database, to: destination),
                                                 partial: partial, file: file, target: target, completion: completion)
                    return nil
                } catch {
                    systemClose(file)
                    unlink(partial)
                    return .unavailable("\(partial): \(error)")
                }
            }
            if let started { return completion(.failure(started)) }
            continueBackup()
        }
    }

    /// Copies one more piece; then, away from the writer, waits for the piece to reach the disk
    /// before the next, so the copy never has more than a piece unwritten: a copy of gigabytes
    /// synced at the end stalled the store's own syncs for half a second. Once the copy is whole,
    /// it is marked as a copy, synced and moved into place, away from the writer too.
    private func continueBackup() {
        enum Next {
            case more(file: Int32)
            case whole(partial: String, file: Int32, target: String, completion: @Sendable (Result<StoreBackup, StorageError>) -> Void)
            case failed(partial: String, file: Int32, reason: String, completion: @Sendable (Result<StoreBackup, StorageError>) -> Void)
            case ended
        }
        let next = open.withLock { open -> Next in
            guard let backup = open?.backup else { return .ended }
            do throws(SQLiteDatabase.Failure) {
                guard try backup.copy.step(pages: Self.backupStepPages) else { return .more(file: backup.file) }
                backup.copy.finish()
                open?.backup = nil
                return .whole(partial: backup.partial, file: backup.file, target: backup.target, completion: backup.completion)
            } catch {
                backup.copy.finish()
                open?.backup = nil
                return .failed(partial: backup.partial, file: backup.file, reason: error.description, completion: backup.completion)
            }
        }
        switch next {
        case .more(let file):
            backupWriter.async { [self] in
                dataSync(file)
                writer.onWriter { [self] in continueBackup() }
            }
        case .whole(let partial, let file, let target, let completion):
            backupWriter.async {
                completion(Self.moveIntoPlace(partial, file: file, as: target))
            }
        case .failed(let partial, let file, let reason, let completion):
            unlink(partial)
            backupWriter.async { systemClose(file) }
            completion(.failure(.unavailable("\(partial): \(reason)")))
        case .ended:
            break
        }
    }

    /// Marks the finished copy as one (`SQLiteSchema.continueFromCopy`), syncs it, then gives
    /// it its name, so a file with that name is always a whole copy; the directory's entry is
    /// synced too. Closes `file`.
    private static func moveIntoPlace(_ partial: String, file: Int32, as target: String) -> Result<StoreBackup, StorageError> {
        func failure(_ reason: String) -> Result<StoreBackup, StorageError> {
            systemClose(file)
            unlink(partial)
            return .failure(.unavailable("\(partial): \(reason)"))
        }
        do throws(SQLiteDatabase.Failure) {
            // A file of its own, in rollback mode: no log beside it to lose on the way.
            let copy = try SQLiteDatabase(path: partial)
            try copy.execute("PRAGMA journal_mode = DELETE; \(SQLiteSchema.markCopy);")
        } catch {
            return failure(error.description)
        }
        var info = stat()
        guard fsync(file) == 0, fstat(file, &info) == 0 else { return failure(String(cString: strerror(errno))) }
        systemClose(file)
        guard rename(partial, target) == 0 else {
            let reason = String(cString: strerror(errno))
            unlink(partial)
            return .failure(.unavailable("\(target): \(reason)"))
        }
        let directory = String(target[..<(target.lastIndex(of: "/") ?? target.startIndex)])
        let folder = systemOpen(directory.isEmpty ? "." : directory, O_RDONLY)
        if folder >= 0 {
            fsync(folder)
            systemClose(folder)
        }
        return .success(StoreBackup(path: target, bytes: Int(info.st_size)))
    }

    public func newestBackup(in directory: String) -> Int? {
        var newest: Int?
        Self.eachCopy(in: directory) { name, info in
            guard name.hasSuffix(".sqlite3") else { return }
            newest = max(newest ?? 0, modified(info))
        }
        return newest
    }

    /// Puts `copy`, a store file (one `backUp` wrote, most often), in place as the store of
    /// `directory`, made if absent, and returns its path. Refuses a directory that holds a store,
    /// or what is left of one: a log (`-wal`) beside the copy would be read into it at the next
    /// start, giving neither the copy nor the store it replaced. Refuses a file that is not a
    /// navd store, or is one of a newer navd. The store is moved into place whole, so a start
    /// finds it or nothing; the copy's ids move on at that start (`SQLiteSchema.continueFromCopy`).
    public static func restore(_ copy: String, into directory: String) throws(StorageError) -> String {
        // What failed, as the store's error: SQLite's failures name the copy.
        func refusal(_ error: any Error) -> StorageError {
            error as? StorageError ?? .cannotOpen("\(copy): \(error)")
        }
        // The copy is looked at first: a refused one leaves nothing behind, not even a directory.
        // SQLite would call a missing or unreadable copy one it is "unable to open".
        guard access(copy, R_OK) == 0 else { throw .cannotOpen("\(copy): \(String(cString: strerror(errno)))") }
        let source: SQLiteDatabase
        do {
            source = try SQLiteDatabase(path: copy, readOnly: true)
            if let unread = unreadable(copy, application: try source.integer("PRAGMA application_id"),
                                       version: try source.integer("PRAGMA user_version")) {
                throw unread
            }
        } catch {
            throw refusal(error)
        }
        var info = stat()
        let made = stat(directory, &info) != 0
        if let failure = makeDirectories(directory) {
            throw .cannotOpen("cannot create the data directory \(directory): \(failure)")
        }
        let path = entry("navd.sqlite3", in: directory)
        let folder = systemOpen(directory, O_RDONLY)
        defer { if folder >= 0 { systemClose(folder) } }
        // Held while the store goes into place: a navd starting on the directory meanwhile waits.
        if folder >= 0 { _ = flock(folder, LOCK_EX) }
        for existing in [path, path + "-wal", path + "-journal"] where lstat(existing, &info) == 0 {
            throw .cannotOpen("\(directory) holds a store already (\(existing)): restore into an empty directory, or move what is there aside")
        }
        do {
            let fresh = newStore(for: path)
            let file = systemOpen(fresh, O_RDWR | O_CREAT | O_EXCL, 0o600)
            guard file >= 0 else { throw StorageError.cannotOpen("\(fresh): \(String(cString: strerror(errno)))") }
            defer { systemClose(file) }
            do {
                let destination = try SQLiteDatabase(path: fresh)
                let copying = try SQLiteBackup(from: source, to: destination)
                while try !copying.step(pages: 4096) {}
                copying.finish()
            }  // Closed here: the destination is synced as it closes its transaction.
            guard fsync(file) == 0, rename(fresh, path) == 0 else {
                let reason = String(cString: strerror(errno))
                unlink(fresh)
                throw StorageError.cannotOpen("\(path): \(reason)")
            }
            if folder >= 0 { fsync(folder) }
            return path
        } catch {
            discardNewStore(for: path)
            // A directory this restore made goes with it.
            if made { rmdir(directory) }
            throw refusal(error)
        }
    }

    /// Removes partial copies (`navd-….sqlite3.partial`) nobody has written for
    /// `abandonedAfterSeconds`: a process killed while making one leaves it behind.
    private static func removeAbandonedCopies(in directory: String) {
        let now = Int(time(nil))
        eachCopy(in: directory) { name, info in
            guard name.hasSuffix(".sqlite3.partial"), now - modified(info) > abandonedAfterSeconds else { return }
            unlink(entry(name, in: directory))
        }
    }

    /// Every regular file in `directory` named as a copy is (`navd-…`), with what `lstat` says of it.
    private static func eachCopy(in directory: String, _ body: (_ name: String, _ info: stat) -> Void) {
        guard let folder = opendir(directory) else { return }
        defer { closedir(folder) }
        while let entry = readdir(folder) {
            let name = withUnsafePointer(to: entry.pointee.d_name) {
                String(cString: UnsafeRawPointer($0).assumingMemoryBound(to: CChar.self))
            }
            guard name.hasPrefix("navd-") else { continue }
            var info = stat()
            guard lstat(Self.entry(name, in: directory), &info) == 0,
                  info.st_mode & S_IFMT == S_IFREG else { continue }
            body(name, info)
        }
    }

    /// `navd-20261129T094512Z.sqlite3` in `directory`, by UTC time, with `-2`, `-3`… after a
    /// name already taken (two copies in one second).
    private static func unusedBackupPath(in directory: String) -> String {
        var now = time(nil)
        var parts = tm()
        gmtime_r(&now, &parts)
        func padded(_ value: Int32, _ width: Int) -> String {
            let digits = String(value)
            return String(repeating: "0", count: max(0, width - digits.count)) + digits
        }
        let date = padded(parts.tm_year + 1900, 4) + padded(parts.tm_mon + 1, 2) + padded(parts.tm_mday, 2)
        let stamp = date + "T" + padded(parts.tm_hour, 2) + padded(parts.tm_min, 2) + padded(parts.tm_sec, 2) + "Z"
        let base = entry("navd-" + stamp, in: directory)
        var candidate = base + ".sqlite3"
        var info = stat()
        var suffix = 2
        while stat(candidate, &info) == 0 || stat(candidate + ".partial", &info) == 0 {
            candidate = "\(base)-\(suffix).sqlite3"
            suffix += 1
        }
        return candidate
    }

    // MARK: - Statistics and closing

    private func record(_ result: Result<[GroupCommit.Verdict], StorageError>, requests: Int, seconds: Double) {
        let succeeded = if case .success = result { true } else { false }
        counters.withLock { $0.record(commitSucceeded: succeeded, requests: requests, seconds: seconds) }
    }

    public func commitRunningFor() -> Duration? { writer.runningFor }

    public func statistics() -> StorageStatistics {
        var statistics = counters.withLock { $0 }
        statistics.bytesOnDisk = [path, path + "-wal"].reduce(0) { total, file in
            var info = stat()
            return total + (stat(file, &info) == 0 ? Int(info.st_size) : 0)
        }
        return statistics
    }

    public func close() {
        writer.close()
        let abandoned = open.withLock { open -> RunningBackup? in
            defer { open?.backup = nil }
            open?.backup?.copy.finish()
            return open?.backup
        }
        if let abandoned {
            unlink(abandoned.partial)
            let file = abandoned.file
            backupWriter.async { systemClose(file) }
            abandoned.completion(.failure(.unavailable("the store closed before the backup was whole")))
        }
        open.withLock { open in
            // What deletions freed goes back now, and the log is folded into the database, so
            // the next start reads one file no larger than its sessions need.
            if let database = open?.database { while giveBackFreePages(database) {} }
            // The clock stops here, until the next process opens the store.
            if let open { try? open.database.run("UPDATE clock SET seconds = ?", [.real(open.clock)]) }
            try? open?.database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            open = nil
        }
    }
}

extension Duration {
    fileprivate var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

/// `open(2)`, which the store's own `open` shadows inside it; close-on-exec, as every descriptor
/// navd opens: a process started meanwhile (by the host, or a test) would otherwise keep it, and
/// with it the lock it may carry, for as long as that process lives.
func systemOpen(_ path: String, _ flags: Int32, _ mode: mode_t = 0) -> Int32 {
    #if canImport(Glibc)
    Glibc.open(path, flags | O_CLOEXEC, mode)
    #else
    Darwin.open(path, flags | O_CLOEXEC, mode)
    #endif
}

/// `close(2)`, which the store's own `close()` shadows inside it.
private func systemClose(_ descriptor: Int32) {
    #if canImport(Glibc)
    _ = Glibc.close(descriptor)
    #else
    _ = Darwin.close(descriptor)
    #endif
}

/// Waits for what was written to `file` to reach the disk, its data at least.
private func dataSync(_ file: Int32) {
    #if canImport(Glibc)
    _ = fdatasync(file)
    #else
    _ = fsync(file)
    #endif
}

/// When a file was last written, in seconds since 1970.
private func modified(_ info: stat) -> Int {
    #if canImport(Glibc)
    Int(info.st_mtim.tv_sec)
    #else
    Int(info.st_mtimespec.tv_sec)
    #endif
}

/// A file by device and inode: what a path names now, compared with what was opened.
private struct FileIdentity: Equatable {
    let device: UInt64
    let inode: UInt64

    /// Nil when nothing is at `path`.
    init?(_ path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }
}
