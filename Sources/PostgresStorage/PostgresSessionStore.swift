import Dispatch
import SessionStorage
import Synchronization

/// Sessions in a PostgreSQL database, for several nodes sharing one store.
///
/// The same guarantees as the SQLite store: a commit returns only once PostgreSQL has flushed
/// it (`synchronous_commit = on`, set on the connection whatever the server's default), and one
/// writer (a serial queue with its own connection) commits whatever arrived while the previous
/// commit was flushing in one transaction, so requests share a flush. Tokens are stored as the
/// hashes the server hands over. The tables are created at start by an idempotent migration
/// that several nodes may run at once.
///
/// Several nodes share it (`SharedSessionStorage`): a session's row holds the epoch of the node
/// that owns it; a claim raises it under the row's lock and announces it (`NOTIFY`), and every
/// fenced request locks its session's row and checks the epoch in the transaction that writes
/// it. Claims run on a connection of their own, so loading a session never waits behind a
/// commit's flush; announcements are heard on a third (`ClaimListener`), and expiry sweeps
/// run on a fourth.
public final class PostgresSessionStore: SharedSessionStorage {
    private let retention: EventRetention
    private let connection: Mutex<PostgresConnection?>
    private let writer: GroupCommit
    /// Claims' connection, opened on the first claim, and their queue.
    private let claimer = Mutex<PostgresConnection?>(nil)
    private let claims = DispatchQueue(label: "navd.store.claims")
    /// Sweeps' connection, opened on the first sweep, and their queue.
    private let sweeper = Mutex<PostgresConnection?>(nil)
    private let sweeps = DispatchQueue(label: "navd.store.sweeps")
    private let listener: ClaimListener
    private let url: String
    /// How long any statement waits for the server (`PostgresConnection.answerTimeout`).
    private let answerTimeout: Duration
    private let closed = Atomic<Bool>(false)
    private let counters = Mutex(StorageStatistics())
    /// When the store's size was last asked for: asked on the writer, at most every few seconds.
    private let sizeChecked = Mutex<ContinuousClock.Instant?>(nil)

    private static let sizeInterval: Duration = .seconds(5)

    /// How long a statement waits for the server by default: a little over the server's own
    /// `statement_timeout` (15 s), so a statement the server cancels fails with the server's
    /// message and keeps its connection; only a server that cannot answer at all meets it.
    public static let defaultAnswerTimeout: Duration = .seconds(20)

    /// Connects to `url` (`postgresql://user:password@host:port/database?…`) and brings the
    /// tables up to date; refuses a database written by a newer navd. The URL (and its
    /// password) never appears in an error. `completionRound` runs the completions of each
    /// commit together (`GroupCommit.CompletionRound`). A statement the server leaves unanswered
    /// for `answerTimeout` fails, and its connection is opened again for the next.
    public init(url: String, retention: EventRetention, answerTimeout: Duration = PostgresSessionStore.defaultAnswerTimeout,
                completionRound: @escaping GroupCommit.CompletionRound = { $0() }) throws(StorageError) {
        writer = GroupCommit(label: "navd.store.writer", completionRound: completionRound)
        self.retention = retention
        self.url = url
        self.answerTimeout = answerTimeout
        self.listener = ClaimListener(url: url, answerTimeout: answerTimeout)
        let connection: PostgresConnection
        let found: Int
        do throws(PostgresConnection.Failure) {
            connection = try PostgresConnection(url: url, answerTimeout: answerTimeout)
            found = try Self.migrate(connection)
        } catch {
            throw .cannotOpen("PostgreSQL: \(error)")
        }
        guard found <= PostgresSchema.version else {
            throw .cannotOpen("the database was written by a newer navd (schema \(found); this navd reads \(PostgresSchema.version))")
        }
        self.connection = Mutex(connection)
        writer.onWriter { self.measureSize(force: true) }
    }

    /// One transaction holding an advisory lock: nodes that start together migrate one after
    /// the other, and each finds the work done or does it. Returns the schema version found.
    private static func migrate(_ connection: PostgresConnection) throws(PostgresConnection.Failure) -> Int {
        // A node that starts while others serve may lose a lock wait to them (a deadlock is
        // reported to one side): it tries again rather than failing to start.
        var attempt = 0
        while true {
            do throws(PostgresConnection.Failure) {
                return try migrateOnce(connection)
            } catch where attempt < 4 && ["40P01", "40001", "55P03"].contains(error.sqlState ?? "") {
                attempt += 1
            }
        }
    }

    private static func migrateOnce(_ connection: PostgresConnection) throws(PostgresConnection.Failure) -> Int {
        // A newer schema is left as it is: this navd refuses it.
        try connection.transaction(.untracked, keep: { $0 <= PostgresSchema.version }) { () throws(PostgresConnection.Failure) -> Int in
            // A start may wait for another node's migration, and a migration for the tables'
            // users: longer than a request's transaction may, still not forever.
            try connection.execute("SET LOCAL lock_timeout TO '60s'; SET LOCAL statement_timeout TO '120s'")
            let answerTimeout = connection.answerTimeout
            connection.answerTimeout = max(answerTimeout, .seconds(125))
            defer { connection.answerTimeout = answerTimeout }
            try connection.run("SELECT pg_advisory_xact_lock($1)", [.integer(PostgresSchema.migrationLock)])
            // Up to date: no DDL at all, so a node starting beside serving ones takes no lock
            // on their tables (ALTER TABLE locks the table even when the column exists).
            let exists = try connection.integer("SELECT (to_regclass('navd_schema') IS NOT NULL)::int::bigint") == 1
            var version = exists ? try connection.integer("SELECT coalesce(max(version), 0)::bigint FROM navd_schema") : 0
            if version < PostgresSchema.version {
                // "already exists, skipping" is not news for the log.
                try connection.execute("SET LOCAL client_min_messages TO warning")
                try connection.execute(PostgresSchema.create)
                version = try connection.integer("SELECT version::bigint FROM navd_schema WHERE id = 1")
            }
            return version
        }
    }

    // MARK: - Loading

    /// Reads a page of sessions at a time, each with the events the buffer keeps, as far as
    /// `memory` has room for them (`EventCut`).
    public func load(within memory: Int, perSession: Int, _ each: (StoredSession) -> Void) throws(StorageError) -> [String] {
        let cut = try connection.withLock { connection -> Result<EventCut, StorageError> in
            guard let connection else { return .failure(.unavailable("the store is closed")) }
            do throws(PostgresConnection.Failure) {
                try connection.reconnectIfNeeded()
                return .success(try connection.transaction(.snapshotReadOnly) { () throws(PostgresConnection.Failure) in
                    try EventCut(in: connection, within: memory, perSession: perSession)
                })
            } catch {
                return .failure(error.storageError)
            }
        }.get()
        let failed = try SessionPage.readAll({ cursor throws(StorageError) in
            try connection.withLock { connection -> Result<SessionPage, StorageError> in
                guard let connection else { return .failure(.unavailable("the store is closed")) }
                do throws(PostgresConnection.Failure) {
                    try connection.reconnectIfNeeded()
                    // One page is one consistent view, whatever other nodes commit meanwhile.
                    return .success(try connection.transaction(.snapshotReadOnly) {
                        () throws(PostgresConnection.Failure) in
                        try Self.page(after: cursor, from: connection, retention: retention, cut: cut)
                    })
                } catch {
                    return .failure(error.storageError)
                }
            }.get()
        }, each)
        // The one id the pages leave out, which navd never writes (another program's edit):
        // reported, never passed over. The id is the primary key, so it cannot be NULL.
        let empty = try connection.withLock { connection -> Result<Bool, StorageError> in
            guard let connection else { return .failure(.unavailable("the store is closed")) }
            do throws(PostgresConnection.Failure) {
                var found = false
                try connection.run("SELECT 1 FROM navd_sessions WHERE id = ''", []) { _ in found = true }
                return .success(found)
            } catch {
                return .failure(error.storageError)
            }
        }.get()
        return empty ? failed + ["(a session without an id)"] : failed
    }

    private static func page(after cursor: String, from connection: PostgresConnection,
                             retention: EventRetention, cut: EventCut) throws(PostgresConnection.Failure) -> SessionPage {
        var page = SessionPage()
        var rows: [(SessionRecord, SessionSnapshot)] = []
        try connection.run("""
            SELECT id, token_hash, feature, created, version, last_sequence, next_serial, state, tree, extras
            FROM navd_sessions WHERE id > $1 ORDER BY id LIMIT \(SessionPage.size)
            """, [.text(cursor)]) { row in
            let id = row.text(0)
            page.last = id
            let tokenHash = row.bytes(1)
            guard tokenHash.count == TokenHash.byteCount else {
                page.failed.append(id)
                return
            }
            rows.append((SessionRecord(id: id, tokenHash: tokenHash, feature: row.text(2), created: row.real(3)),
                         SessionSnapshot(version: row.integer(4), lastSequence: row.integer(5), nextSerial: row.integer(6),
                                         state: row.bytes(7), tree: row.bytes(8), extras: row.bytes(9))))
        }
        guard let last = page.last else { return page }
        let range: [PostgresValue] = [.text(cursor), .text(last)]
        var transactions: [String: [SessionTransaction]] = [:]
        try connection.run("""
            SELECT session, version, last_sequence, next_serial, patch, extras FROM navd_transactions
            WHERE session > $1 AND session <= $2 ORDER BY ordinal
            """, range) { row in
            transactions[row.text(0), default: []].append(SessionTransaction(
                version: row.integer(1), lastSequence: row.integer(2), nextSerial: row.integer(3),
                statePatch: row.bytes(4), events: [], extras: row.isNull(5) ? nil : row.bytes(5)))
        }
        var events: [String: [StoredEvent]] = [:]
        try connection.run("""
            SELECT s.id, e.sequence, e.kind, e.data FROM navd_sessions s CROSS JOIN LATERAL (\(EventCut.keptEvents)) e
            WHERE s.id > $1 AND s.id <= $2 ORDER BY s.id, e.sequence
            """, range + [.integer(cut.rounds), .text(cut.lastSession)]) { row in
            events[row.text(0), default: []].append(StoredEvent(sequence: row.integer(1), kind: row.text(2), data: row.bytes(3)))
        }
        for (record, snapshot) in rows {
            page.sessions.append(StoredSession(record: record, snapshot: snapshot, transactions: transactions[record.id] ?? [],
                                               events: events[record.id] ?? [], retention: retention))
        }
        return page
    }

    // MARK: - Committing

    public func commit(_ writes: [StoreWrite], admissible: @escaping @Sendable () -> Bool,
                       completion: @escaping @Sendable (Result<Void, StorageError>) -> Void) {
        writer.submit(writes, admissible: admissible, completion: completion,
                      commitTogether: { [self] requests in commitTogether(requests) }, afterRound: { [self] in measureSize(force: false) })
    }

    private func commitTogether(_ requests: [[StoreWrite]]) -> Result<[GroupCommit.Verdict], StorageError> {
        let started = ContinuousClock.now
        let result = connection.withLock { connection -> Result<[GroupCommit.Verdict], StorageError> in
            guard let connection else { return .failure(.unavailable("the store is closed")) }
            do throws(PostgresConnection.Failure) {
                try connection.reconnectIfNeeded()
                // Returns once the commit record is flushed: synchronous_commit = on.
                return .success(try connection.transaction { () throws(PostgresConnection.Failure) -> [GroupCommit.Verdict] in
                    let epochs = try lockFenced(requests, in: connection)
                    let verdicts = try requests.map { request throws(PostgresConnection.Failure) -> GroupCommit.Verdict in
                        guard case .fence(let id, let epoch)? = request.first else { return .written }
                        // No row: gone, which its holder must tell from a takeover, and its
                        // clients hear why.
                        guard let current = epochs[id] else {
                            return try Self.wasExpired(id, in: connection) ? .expired : .deleted
                        }
                        return current == epoch ? .written : .fenced
                    }
                    for (request, verdict) in zip(requests, verdicts) where verdict == .written {
                        for write in request { try apply(write, to: connection) }
                    }
                    return verdicts
                })
            } catch {
                return .failure(error.storageError)
            }
        }
        record(result, requests: requests.count, seconds: (ContinuousClock.now - started).seconds)
        return result
    }

    /// Locks the rows of the fenced requests' sessions until the commit, in id order (so two
    /// nodes' batches never wait on each other in a cycle), and returns their epochs. A claim
    /// waits for the lock: a fence that holds here holds until the batch is durable.
    private func lockFenced(_ requests: [[StoreWrite]], in connection: PostgresConnection) throws(PostgresConnection.Failure) -> [String: Int] {
        var ids: Set<String> = []
        for request in requests {
            if case .fence(let id, _)? = request.first { ids.insert(id) }
        }
        guard !ids.isEmpty else { return [:] }
        var epochs: [String: Int] = [:]
        // Ids are the server's own (hex), so a comma is a safe separator.
        try connection.run("""
            SELECT id, epoch FROM navd_sessions WHERE id = ANY(string_to_array($1, ',')) ORDER BY id FOR NO KEY UPDATE
            """, [.text(ids.sorted().joined(separator: ","))]) { row in
            epochs[row.text(0)] = row.integer(1)
        }
        return epochs
    }

    private func apply(_ write: StoreWrite, to connection: PostgresConnection) throws(PostgresConnection.Failure) {
        switch write {
        case .create(let record, let snapshot):
            try connection.run("""
                INSERT INTO navd_sessions (id, token_hash, feature, created, version, last_sequence, next_serial, state, tree, extras)
                VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                """, [.text(record.id), .bytes(record.tokenHash), .text(record.feature), .real(record.created)] + Self.values(snapshot))
        case .transaction(let id, let transaction):
            // A batch that was in flight when its session ended writes nothing: no row is left
            // without its session.
            try connection.run("""
                INSERT INTO navd_transactions (session, version, last_sequence, next_serial, patch, extras)
                SELECT $1, $2, $3, $4, $5, $6 WHERE EXISTS (SELECT 1 FROM navd_sessions WHERE id = $1)
                """, [.text(id), .integer(transaction.version), .integer(transaction.lastSequence), .integer(transaction.nextSerial),
                      .bytes(transaction.statePatch), transaction.extras.map { .bytes($0) } ?? .noBytes])
            for event in transaction.events {
                try connection.run("""
                    INSERT INTO navd_events (session, sequence, kind, data)
                    SELECT $1, $2, $3, $4 WHERE EXISTS (SELECT 1 FROM navd_sessions WHERE id = $1)
                    ON CONFLICT (session, sequence) DO UPDATE SET kind = excluded.kind, data = excluded.data
                    """, [.text(id), .integer(event.sequence), .text(event.kind), .bytes(event.data)])
            }
        case .snapshot(let id, let snapshot):
            try connection.run("""
                UPDATE navd_sessions SET version = $1, last_sequence = $2, next_serial = $3, state = $4, tree = $5, extras = $6 WHERE id = $7
                """, Self.values(snapshot) + [.text(id)])
            // Every transaction of this session so far is covered: later ones come after this write.
            try connection.run("DELETE FROM navd_transactions WHERE session = $1", [.text(id)])
            try trimEvents(of: id, through: snapshot.lastSequence, in: connection)
        case .fence:
            // Checked for the whole batch before any write (`lockFenced`).
            break
        case .idle:
            // Never sent to a shared store: its nodes record use in `sweep`.
            break
        case .probe:
            try connection.run("""
                INSERT INTO navd_probes (id, written) VALUES (1, now()) ON CONFLICT (id) DO UPDATE SET written = excluded.written
                """)
        case .delete(let id, let expired):
            try deleteLocked(id, expired: expired, in: connection)
        }
    }

    /// Deletes session `id` with everything kept of it, and tells any node still holding it to
    /// end it; one that `expired` is remembered as a sweep's are, for a holder that hears late.
    private func deleteLocked(_ id: String, expired: Bool = false, in connection: PostgresConnection) throws(PostgresConnection.Failure) {
        try connection.run("DELETE FROM navd_sessions WHERE id = $1", [.text(id)])
        try connection.run("DELETE FROM navd_transactions WHERE session = $1", [.text(id)])
        try connection.run("DELETE FROM navd_events WHERE session = $1", [.text(id)])
        if expired { try Self.rememberExpired(.text(id), in: connection) }
        try announce(id, epoch: expired ? SessionEpoch.expired : SessionEpoch.deleted, in: connection)
    }

    /// Keeps the events the session's buffer would keep: the newest, by count and by bytes.
    private func trimEvents(of id: String, through last: Int, in connection: PostgresConnection) throws(PostgresConnection.Failure) {
        try connection.run("DELETE FROM navd_events WHERE session = $1 AND sequence <= $2", [.text(id), .integer(last - retention.count)])
        try connection.run("""
            DELETE FROM navd_events WHERE session = $1 AND sequence <= (
                SELECT max(sequence) FROM (
                    SELECT sequence, sum(length(data)) OVER (ORDER BY sequence DESC) AS newer
                    FROM navd_events WHERE session = $1
                ) AS kept WHERE newer > $2
            )
            """, [.text(id), .integer(retention.bytes)])
    }

    private static func values(_ snapshot: SessionSnapshot) -> [PostgresValue] {
        [.integer(snapshot.version), .integer(snapshot.lastSequence), .integer(snapshot.nextSerial),
         .bytes(snapshot.state), .bytes(snapshot.tree), .bytes(snapshot.extras)]
    }

    // MARK: - Ownership

    /// The connection of a queue beside the commits (claims, sweeps), opened on first use and
    /// opened again if it was lost.
    private func opened(_ connection: inout PostgresConnection?) throws(PostgresConnection.Failure) -> PostgresConnection {
        let current: PostgresConnection
        if let connection {
            current = connection
        } else {
            current = try PostgresConnection(url: url, answerTimeout: answerTimeout)
        }
        connection = current
        try current.reconnectIfNeeded()
        return current
    }

    public func claim(_ id: String, authorize: @escaping @Sendable ([UInt8]) -> Bool,
                      restore: @escaping @Sendable (StoredSession, Int) -> Bool,
                      completion: @escaping @Sendable (Result<SessionClaim, StorageError>) -> Void) {
        claims.async { [self] in
            guard !closed.load(ordering: .relaxed) else { return completion(.failure(.unavailable("the store is closed"))) }
            completion(claimer.withLock { connection in claim(id, authorize, restore, on: &connection) })
        }
    }

    public func onTakeover(held: @escaping @Sendable () -> [String], _ body: @escaping @Sendable (String, Int) -> Void) {
        listener.start(held: held, body)
    }

    /// One transaction: the row locked (waiting for the owner's commit in flight, if any), the
    /// token checked, the session read and restored, the epoch raised, the claim announced. Read
    /// committed: each statement after the lock sees every commit the old owner made before it,
    /// and no commit of its comes between, since each locks the row too.
    private func claim(_ id: String, _ authorize: ([UInt8]) -> Bool, _ restore: (StoredSession, Int) -> Bool,
                       on connection: inout PostgresConnection?) -> Result<SessionClaim, StorageError> {
        do throws(PostgresConnection.Failure) {
            let connection = try opened(&connection)
            return .success(try connection.transaction(keep: \.isClaimed) { () throws(PostgresConnection.Failure) in
                try claimLocked(id, authorize, restore, connection)
            })
        } catch {
            return .failure(error.storageError)
        }
    }

    public func currentEpoch(of id: String, completion: @escaping @Sendable (Result<Int, StorageError>) -> Void) {
        claims.async { [self] in
            guard !closed.load(ordering: .relaxed) else { return completion(.failure(.unavailable("the store is closed"))) }
            completion(claimer.withLock { connection in
                do throws(PostgresConnection.Failure) {
                    var epoch = SessionEpoch.deleted
                    try opened(&connection).run("SELECT epoch FROM navd_sessions WHERE id = $1", [.text(id)]) { epoch = $0.integer(0) }
                    return .success(epoch)
                } catch {
                    return .failure(error.storageError)
                }
            })
        }
    }

    public func delete(_ id: String, ifVersion: Int?, authorize: @escaping @Sendable ([UInt8]) -> Bool,
                       completion: @escaping @Sendable (Result<SessionDeletion, StorageError>) -> Void) {
        claims.async { [self] in
            guard !closed.load(ordering: .relaxed) else { return completion(.failure(.unavailable("the store is closed"))) }
            completion(claimer.withLock { connection in delete(id, ifVersion: ifVersion, authorize, on: &connection) })
        }
    }

    /// The token and the version are checked on the row, locked, in the transaction that
    /// deletes it: the holder's commits, which lock it too, cannot come between. The version is
    /// the durable one (the snapshot's, or the last transaction's after it), which is the newest
    /// any client was answered; it is read once the lock is held, by a statement of its own, so
    /// it sees a commit the lock waited for.
    private func delete(_ id: String, ifVersion: Int?, _ authorize: ([UInt8]) -> Bool,
                        on connection: inout PostgresConnection?) -> Result<SessionDeletion, StorageError> {
        do throws(PostgresConnection.Failure) {
            let connection = try opened(&connection)
            return .success(try connection.transaction(keep: { $0 == .deleted }) { () throws(PostgresConnection.Failure) -> SessionDeletion in
                var tokenHash: [UInt8]?
                try connection.run("SELECT token_hash FROM navd_sessions WHERE id = $1 FOR UPDATE", [.text(id)]) { row in
                    tokenHash = row.bytes(0)
                }
                guard let tokenHash else { return .notFound }
                guard tokenHash.count == TokenHash.byteCount, authorize(tokenHash) else { return .refused }
                if let ifVersion {
                    var version = 0
                    try connection.run("""
                        SELECT greatest(version, coalesce((SELECT max(version) FROM navd_transactions WHERE session = $1), 0))
                        FROM navd_sessions WHERE id = $1
                        """, [.text(id)]) { version = $0.integer(0) }
                    if ifVersion != version { return .versionMismatch(current: version) }
                }
                try deleteLocked(id, in: connection)
                return .deleted
            })
        } catch {
            return .failure(error.storageError)
        }
    }

    private func claimLocked(_ id: String, _ authorize: ([UInt8]) -> Bool, _ restore: (StoredSession, Int) -> Bool,
                             _ connection: PostgresConnection) throws(PostgresConnection.Failure) -> SessionClaim {
        var found: (SessionRecord, SessionSnapshot, epoch: Int)?
        try connection.run("""
            SELECT token_hash, feature, created, version, last_sequence, next_serial, state, tree, extras, epoch
            FROM navd_sessions WHERE id = $1 FOR NO KEY UPDATE
            """, [.text(id)]) { row in
            found = (SessionRecord(id: id, tokenHash: row.bytes(0), feature: row.text(1), created: row.real(2)),
                     SessionSnapshot(version: row.integer(3), lastSequence: row.integer(4), nextSerial: row.integer(5),
                                     state: row.bytes(6), tree: row.bytes(7), extras: row.bytes(8)), row.integer(9))
        }
        guard let (record, snapshot, heldEpoch) = found else { return .notFound }
        guard record.tokenHash.count == TokenHash.byteCount else { return .unreadable }
        guard authorize(record.tokenHash) else { return .refused }
        var transactions: [SessionTransaction] = []
        try connection.run("""
            SELECT version, last_sequence, next_serial, patch, extras FROM navd_transactions WHERE session = $1 ORDER BY ordinal
            """, [.text(id)]) { row in
            transactions.append(SessionTransaction(version: row.integer(0), lastSequence: row.integer(1), nextSerial: row.integer(2),
                                                   statePatch: row.bytes(3), events: [], extras: row.isNull(4) ? nil : row.bytes(4)))
        }
        var events: [StoredEvent] = []
        try connection.run("SELECT sequence, kind, data FROM navd_events WHERE session = $1 ORDER BY sequence", [.text(id)]) { row in
            events.append(StoredEvent(sequence: row.integer(0), kind: row.text(1), data: row.bytes(2)))
        }
        let stored = StoredSession(record: record, snapshot: snapshot, transactions: transactions, events: events, retention: retention)
        // The row is locked, so the epoch the update below gives is this one.
        guard heldEpoch < Int.max, restore(stored, heldEpoch + 1) else { return .unreadable }
        let epoch = try connection.integer("""
            UPDATE navd_sessions SET epoch = epoch + 1, last_active = \(PostgresSchema.now) WHERE id = $1 RETURNING epoch
            """, [.text(id)])
        guard epoch == heldEpoch + 1 else { return .unreadable }
        try announce(id, epoch: epoch, in: connection)
        return .claimed(stored, epoch: epoch)
    }

    // MARK: - Expiry

    /// Sessions deleted by one sweep at most: a backlog (a node's sessions after it left for
    /// good) goes over a few rounds rather than in one long transaction.
    static let sweepLimit = 1000
    /// Sessions recorded as used per statement: each statement holds its rows' locks only
    /// until it commits, so a node's commits wait on its record for a moment at most.
    static let markChunk = 500

    public func sweep(inUse: [String], idle: Duration?, completion: @escaping @Sendable (Result<[String], StorageError>) -> Void) {
        sweeps.async { [self] in
            guard !closed.load(ordering: .relaxed) else { return completion(.failure(.unavailable("the store is closed"))) }
            completion(sweeper.withLock { connection in sweep(inUse, idle, on: &connection) })
        }
    }

    /// On a connection of its own, so neither commits nor claims queue behind it. The record
    /// of use goes first, in chunks that each commit on their own, their rows locked in id
    /// order as commits lock theirs (so the two never wait on each other in a cycle). The
    /// deletion is one transaction; expired rows a commit or a claim holds are skipped (they
    /// are in use), never waited for.
    private func sweep(_ inUse: [String], _ idle: Duration?, on connection: inout PostgresConnection?) -> Result<[String], StorageError> {
        do throws(PostgresConnection.Failure) {
            let connection = try opened(&connection)
            do throws(PostgresConnection.Failure) {
                return .success(try sweepOnce(inUse, idle, connection))
            } catch where !connection.isConnected && !error.outcomeUnknown && !error.unanswered {
                // Lost on the way (the server restarted since the last sweep, which libpq learns
                // only now): every step may be made again, so the sweep is, once. Not after a
                // server that did not answer: the next round tries again.
                try connection.reconnectIfNeeded()
                return .success(try sweepOnce(inUse, idle, connection))
            }
        } catch {
            return .failure(error.storageError)
        }
    }

    private func sweepOnce(_ inUse: [String], _ idle: Duration?, _ connection: PostgresConnection) throws(PostgresConnection.Failure) -> [String] {
        // A record waits on other nodes' commits of its rows, never for long (set each time:
        // a reconnection forgets it).
        try connection.execute("SET lock_timeout = '5s'")
        for start in stride(from: 0, to: inUse.count, by: Self.markChunk) {
            let chunk = inUse[start..<min(start + Self.markChunk, inUse.count)]
            try connection.run("""
                WITH used AS (
                    SELECT id FROM navd_sessions WHERE id = ANY(string_to_array($1, ',')) ORDER BY id FOR NO KEY UPDATE
                )
                UPDATE navd_sessions AS s SET last_active = \(PostgresSchema.now) FROM used WHERE s.id = used.id
                """, [.text(chunk.joined(separator: ","))])
        }
        try connection.execute("DELETE FROM navd_commit_lanes WHERE used < now() - interval '\(PostgresSchema.laneMemory)'")
        guard let idle else { return [] }
        return try connection.transaction { () throws(PostgresConnection.Failure) -> [String] in
            var expired: [String] = []
            try connection.run("""
                DELETE FROM navd_sessions AS s USING (
                    SELECT id FROM navd_sessions WHERE last_active < \(PostgresSchema.now) - $1
                    ORDER BY last_active LIMIT $2 FOR UPDATE SKIP LOCKED
                ) AS idle WHERE s.id = idle.id RETURNING s.id
                """, [.real(idle.seconds), .integer(Self.sweepLimit)]) { row in
                expired.append(row.text(0))
            }
            try connection.run("DELETE FROM navd_expired WHERE at < \(PostgresSchema.now) - $1", [.real(PostgresSchema.expiryMemory)])
            if !expired.isEmpty {
                let ids = PostgresValue.text(expired.joined(separator: ","))
                try connection.run("DELETE FROM navd_transactions WHERE session = ANY(string_to_array($1, ','))", [ids])
                try connection.run("DELETE FROM navd_events WHERE session = ANY(string_to_array($1, ','))", [ids])
                try Self.rememberExpired(ids, in: connection)
                // Any node still holding one ends it, as expired.
                try connection.run("SELECT pg_notify($1, id || ' ' || $2) FROM unnest(string_to_array($3, ',')) AS id",
                                   [.text(PostgresSchema.claimsChannel), .text(String(SessionEpoch.expired)), ids])
            }
            return expired
        }
    }

    /// Remembers the sessions `ids` (comma-separated) as expired, so that a holder that hears of
    /// it late still ends them as expired.
    private static func rememberExpired(_ ids: PostgresValue, in connection: PostgresConnection) throws(PostgresConnection.Failure) {
        try connection.run("""
            INSERT INTO navd_expired (id, at) SELECT id, \(PostgresSchema.now) FROM unnest(string_to_array($1, ',')) AS id
            ON CONFLICT (id) DO UPDATE SET at = excluded.at
            """, [ids])
    }

    /// Whether session `id`, which has no row, expired (a sweep or its holder deleted it, still
    /// remembered): its holder then ends it as expired, otherwise as deleted, as the announcement
    /// would have said.
    private static func wasExpired(_ id: String, in connection: PostgresConnection) throws(PostgresConnection.Failure) -> Bool {
        var expired = false
        try connection.run("SELECT 1 FROM navd_expired WHERE id = $1", [.text(id)]) { _ in expired = true }
        return expired
    }

    /// Tells every node (at commit, not before) that session `id` is now at `epoch`.
    private func announce(_ id: String, epoch: Int, in connection: PostgresConnection) throws(PostgresConnection.Failure) {
        try connection.run("SELECT pg_notify($1, $2)", [.text(PostgresSchema.claimsChannel), .text("\(id) \(epoch)")])
    }

    // MARK: - Statistics and closing

    private func record(_ result: Result<[GroupCommit.Verdict], StorageError>, requests: Int, seconds: Double) {
        let succeeded = if case .success = result { true } else { false }
        counters.withLock { $0.record(commitSucceeded: succeeded, requests: requests, seconds: seconds) }
    }

    /// The tables' size with their indexes and TOAST, asked on the writer (which owns the
    /// connection) every few seconds at most, so a scrape costs no round trip.
    private func measureSize(force: Bool) {
        let now = ContinuousClock.now
        let due = sizeChecked.withLock { last -> Bool in
            guard force || last.map({ now - $0 >= Self.sizeInterval }) ?? true else { return false }
            last = now
            return true
        }
        guard due else { return }
        let bytes = connection.withLock { connection -> Int? in
            try? connection?.integer("""
                SELECT (pg_total_relation_size('navd_sessions') + pg_total_relation_size('navd_transactions')
                        + pg_total_relation_size('navd_events'))::bigint
                """)
        }
        if let bytes { counters.withLock { $0.bytesOnDisk = bytes } }
    }

    public func commitRunningFor() -> Duration? { writer.runningFor }

    public func statistics() -> StorageStatistics {
        counters.withLock { $0 }
    }

    public func close() {
        closed.store(true, ordering: .relaxed)
        writer.close()
        claims.sync {}
        sweeps.sync {}
        listener.close()
        connection.withLock { $0 = nil }
        claimer.withLock { $0 = nil }
        sweeper.withLock { $0 = nil }
    }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

extension PostgresConnection.Failure {
    /// As the store reports it; a commit that may have happened is never "unavailable".
    fileprivate var storageError: StorageError {
        if outcomeUnknown { return .outcomeUnknown("PostgreSQL: \(self)") }
        return unanswered ? .unreachable("PostgreSQL: \(self)") : .unavailable("PostgreSQL: \(self)")
    }
}

extension SessionClaim {
    fileprivate var isClaimed: Bool {
        if case .claimed = self { return true }
        return false
    }
}
