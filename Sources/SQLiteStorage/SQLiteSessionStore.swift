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
public final class SQLiteSessionStore: SessionStorage {
    /// How many events per session the store keeps for `Last-Event-ID`: the event buffer's bounds.
    public struct EventRetention: Sendable {
        public var count: Int
        public var bytes: Int

        public init(count: Int, bytes: Int) {
            self.count = max(0, count)
            self.bytes = max(0, bytes)
        }
    }

    public let path: String
    private let retention: EventRetention
    private let database: Mutex<SQLiteDatabase?>
    private let writer = GroupCommit(label: "navd.store.writer")
    private let counters = Mutex(StorageStatistics())

    static let latencyBounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]
    static let batchBounds = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    /// Free pages worth giving back to the file system in one go, after sessions were deleted.
    private static let vacuumThreshold = 1024

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
    /// written by a newer navd, and one another process holds.
    public init(directory: String, retention: EventRetention) throws(StorageError) {
        if let failure = Self.makeDirectories(directory) {
            throw .cannotOpen("cannot create the data directory \(directory): \(failure)")
        }
        path = directory.hasSuffix("/") ? directory + "navd.sqlite3" : directory + "/navd.sqlite3"
        self.retention = retention
        do {
            let database = try SQLiteDatabase(path: path)
            try Self.prepare(database, path: path)
            self.database = Mutex(database)
        } catch let failure as SQLiteDatabase.Failure {
            throw .cannotOpen(failure.isBusy ? "\(path) is in use by another process" : "\(path): \(failure)")
        } catch let error as StorageError {
            throw error
        } catch {
            throw .cannotOpen("\(path): \(error)")
        }
        var statistics = StorageStatistics()
        statistics.latencyBounds = Self.latencyBounds
        statistics.latencyCounts = Array(repeating: 0, count: Self.latencyBounds.count)
        statistics.batchBounds = Self.batchBounds
        statistics.batchCounts = Array(repeating: 0, count: Self.batchBounds.count)
        counters.withLock { $0 = statistics }
    }

    private static func prepare(_ database: SQLiteDatabase, path: String) throws {
        // Before anything reads the file: no waiting on another process, an exclusive lock held
        // for the connection's life (so WAL needs no shared memory), and incremental vacuum,
        // which only takes effect before the first table exists.
        try database.execute("""
            PRAGMA busy_timeout = 0;
            PRAGMA locking_mode = EXCLUSIVE;
            PRAGMA auto_vacuum = INCREMENTAL;
            """)
        let mode = try database.text("PRAGMA journal_mode = WAL")
        guard mode.lowercased() == "wal" else { throw StorageError.cannotOpen("\(path): cannot use write-ahead logging (journal mode \(mode))") }
        try database.execute("""
            PRAGMA synchronous = FULL;
            PRAGMA journal_size_limit = 67108864;
            PRAGMA cache_size = -16384;
            BEGIN EXCLUSIVE;
            """)
        do {
            let application = try database.integer("PRAGMA application_id")
            let version = try database.integer("PRAGMA user_version")
            let tables = try database.integer("SELECT count(*) FROM sqlite_schema")
            if application == 0 && version == 0 && tables == 0 {
                try database.execute(SQLiteSchema.create)
            } else if application != SQLiteSchema.applicationID {
                throw StorageError.cannotOpen("\(path) is not a navd session store")
            } else if version > SQLiteSchema.version {
                throw StorageError.cannotOpen("\(path) was written by a newer navd (schema \(version); this navd reads \(SQLiteSchema.version))")
            }
            // Rows a session's last writes left after its deletion in the same batch window.
            try database.execute("""
                DELETE FROM transactions WHERE session NOT IN (SELECT id FROM sessions);
                DELETE FROM events WHERE session NOT IN (SELECT id FROM sessions);
                COMMIT;
                """)
        } catch {
            try? database.execute("ROLLBACK")
            throw error
        }
    }

    // MARK: - Loading

    public func load(_ each: (StoredSession) -> Void) throws(StorageError) -> [String] {
        let failed = try SessionPage.readAll({ cursor throws(StorageError) in
            try database.withLock { database -> Result<SessionPage, StorageError> in
                guard let database else { return .failure(.unavailable("the store is closed")) }
                do throws(SQLiteDatabase.Failure) {
                    return .success(try Self.page(after: cursor, from: database))
                } catch {
                    return .failure(error.isDiskProblem ? .unavailable(error.description) : .cannotOpen(error.description))
                }
            }.get()
        }, each)
        // The pages read for recovery are not needed again: the sessions live in memory.
        database.withLock { database in _ = try? database?.execute("PRAGMA shrink_memory") }
        return failed
    }

    private static func page(after cursor: String, from database: SQLiteDatabase) throws(SQLiteDatabase.Failure) -> SessionPage {
        var page = SessionPage()
        var rows: [(SessionRecord, SessionSnapshot)] = []
        try database.run("""
            SELECT id, token_hash, feature, created, version, last_sequence, next_serial, state, tree, extras
            FROM sessions WHERE id > ? ORDER BY id LIMIT \(SessionPage.size)
            """, [.text(cursor)]) { row in
            let id = row.text(0)
            page.last = id
            let tokenHash = row.blob(1)
            guard tokenHash.count == TokenHash.byteCount else {
                page.failed.append(id)
                return
            }
            rows.append((SessionRecord(id: id, tokenHash: tokenHash, feature: row.text(2), created: row.real(3)),
                         SessionSnapshot(version: row.integer(4), lastSequence: row.integer(5), nextSerial: row.integer(6),
                                         state: row.blob(7), tree: row.blob(8), extras: row.blob(9))))
        }
        guard let last = page.last else { return page }
        let range: [SQLiteValue] = [.text(cursor), .text(last)]
        var transactions: [String: [SessionTransaction]] = [:]
        try database.run("""
            SELECT session, version, last_sequence, next_serial, patch, extras FROM transactions
            WHERE session > ? AND session <= ? ORDER BY ordinal
            """, range) { row in
            transactions[row.text(0), default: []].append(SessionTransaction(
                version: row.integer(1), lastSequence: row.integer(2), nextSerial: row.integer(3),
                statePatch: row.blob(4), events: [], extras: row.isNull(5) ? nil : row.blob(5)))
        }
        var events: [String: [StoredEvent]] = [:]
        try database.run("""
            SELECT session, sequence, kind, data FROM events WHERE session > ? AND session <= ? ORDER BY session, sequence
            """, range) { row in
            events[row.text(0), default: []].append(StoredEvent(sequence: row.integer(1), kind: row.text(2), data: row.blob(3)))
        }
        for (record, snapshot) in rows {
            page.sessions.append(StoredSession(record: record, snapshot: snapshot, transactions: transactions[record.id] ?? [],
                                               keptEvents: events[record.id] ?? []))
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
    private func commitTogether(_ requests: [[StoreWrite]]) -> Result<[Bool], StorageError> {
        let started = ContinuousClock.now
        let result = database.withLock { database -> Result<[Bool], StorageError> in
            guard let database else { return .failure(.unavailable("the store is closed")) }
            do throws(SQLiteDatabase.Failure) {
                try database.execute("BEGIN IMMEDIATE")
                do throws(SQLiteDatabase.Failure) {
                    for request in requests {
                        for write in request { try apply(write, to: database) }
                    }
                    try database.execute("COMMIT")
                } catch {
                    try? database.execute("ROLLBACK")
                    throw error
                }
                giveBackFreePages(database)
                return .success(Array(repeating: true, count: requests.count))
            } catch {
                return .failure(.unavailable(error.description))
            }
        }
        record(result, requests: requests.count, seconds: (ContinuousClock.now - started).seconds)
        return result
    }

    private func apply(_ write: StoreWrite, to database: SQLiteDatabase) throws(SQLiteDatabase.Failure) {
        switch write {
        case .create(let record, let snapshot):
            try database.run("""
                INSERT INTO sessions (id, token_hash, feature, created, version, last_sequence, next_serial, state, tree, extras)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, [.text(record.id), .blob(record.tokenHash), .text(record.feature), .real(record.created)] + Self.values(snapshot))
        case .transaction(let id, let transaction):
            try database.run("""
                INSERT INTO transactions (session, version, last_sequence, next_serial, patch, extras) VALUES (?, ?, ?, ?, ?, ?)
                """, [.text(id), .integer(transaction.version), .integer(transaction.lastSequence), .integer(transaction.nextSerial),
                      .blob(transaction.statePatch)] + (transaction.extras.map { [.blob($0)] } ?? []))
            for event in transaction.events {
                try database.run("INSERT OR REPLACE INTO events (session, sequence, kind, data) VALUES (?, ?, ?, ?)",
                                 [.text(id), .integer(event.sequence), .text(event.kind), .blob(event.data)])
            }
        case .snapshot(let id, let snapshot):
            try database.run("""
                UPDATE sessions SET version = ?, last_sequence = ?, next_serial = ?, state = ?, tree = ?, extras = ? WHERE id = ?
                """, Self.values(snapshot) + [.text(id)])
            // Every transaction of this session so far is covered: later ones come after this write.
            try database.run("DELETE FROM transactions WHERE session = ?", [.text(id)])
            try trimEvents(of: id, through: snapshot.lastSequence, in: database)
        case .fence:
            // Never sent to a store of one node (it hands out no epochs); nothing to check.
            break
        case .probe:
            try database.run("INSERT OR REPLACE INTO probes (id, written) VALUES (1, julianday('now'))")
        case .delete(let id):
            try database.run("DELETE FROM sessions WHERE id = ?", [.text(id)])
            try database.run("DELETE FROM transactions WHERE session = ?", [.text(id)])
            try database.run("DELETE FROM events WHERE session = ?", [.text(id)])
        }
    }

    /// Keeps the events the session's buffer would keep: the newest, by count and by bytes.
    private func trimEvents(of id: String, through last: Int, in database: SQLiteDatabase) throws(SQLiteDatabase.Failure) {
        try database.run("DELETE FROM events WHERE session = ? AND sequence <= ?", [.text(id), .integer(last - retention.count)])
        try database.run("""
            DELETE FROM events WHERE session = ?1 AND sequence <= (
                SELECT max(sequence) FROM (
                    SELECT sequence, sum(length(data)) OVER (ORDER BY sequence DESC) AS newer
                    FROM events WHERE session = ?1
                ) WHERE newer > ?2
            )
            """, [.text(id), .integer(retention.bytes)])
    }

    /// After deletions the file keeps its pages, and new rows reuse them: under steady load
    /// (events trimmed, events added) that is what should happen. Only when a quarter of the
    /// file is free, because live data shrank, do pages go back to the file system, a few at a
    /// time so no commit waits long behind it.
    private func giveBackFreePages(_ database: SQLiteDatabase) {
        guard let free = try? database.integer("PRAGMA freelist_count"), free >= Self.vacuumThreshold,
              let pages = try? database.integer("PRAGMA page_count"), free * 4 >= pages else { return }
        try? database.execute("PRAGMA incremental_vacuum(\(Self.vacuumThreshold))")
    }

    private static func values(_ snapshot: SessionSnapshot) -> [SQLiteValue] {
        [.integer(snapshot.version), .integer(snapshot.lastSequence), .integer(snapshot.nextSerial),
         .blob(snapshot.state), .blob(snapshot.tree), .blob(snapshot.extras)]
    }

    // MARK: - Statistics and closing

    private func record(_ result: Result<[Bool], StorageError>, requests: Int, seconds: Double) {
        counters.withLock { statistics in
            guard case .success = result else {
                statistics.failedCommits += 1
                return
            }
            statistics.commits += 1
            statistics.writes += requests
            statistics.latencySum += seconds
            for (index, bound) in Self.latencyBounds.enumerated() where seconds <= bound { statistics.latencyCounts[index] += 1 }
            for (index, bound) in Self.batchBounds.enumerated() where requests <= bound { statistics.batchCounts[index] += 1 }
        }
    }

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
        database.withLock { database in
            // Folds the log into the database so the next start reads one file.
            try? database?.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            database = nil
        }
    }
}

extension Duration {
    fileprivate var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
