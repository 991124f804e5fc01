import CLibPQ
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One libpq connection: statements prepared once per connection and reused, values sent and
/// read in PostgreSQL's binary format (no escaping, no text round trip for blobs), errors
/// carried with the server's own message and SQLSTATE. Not thread-safe; its owner serialises
/// every use.
final class PostgresConnection {
    private let handle: OpaquePointer
    private var statements: [String: String] = [:]
    /// This connection's row in `navd_commit_lanes`, new with every connection: each tracked
    /// transaction raises the row's count first thing, so the count says, on any later
    /// connection, whether a transaction cut off in its `COMMIT` committed.
    private var lane = CommitLane.make()
    /// Warnings heard while a `COMMIT` ran (`commit()`).
    private let warnings = CommitWarnings()

    /// What the server (or libpq) said, and its SQLSTATE when there was one.
    struct Failure: Error, CustomStringConvertible {
        let message: String
        var sqlState: String?
        /// The connection was lost while committing and whether the commit happened could not be
        /// learned: its writes may be stored, or not.
        var outcomeUnknown = false
        /// The server did not answer: a statement outlived the connection's `answerTimeout` (and
        /// the connection was dropped), or the connection could not be opened again. Worth no
        /// second try at once, which would wait as long again.
        var unanswered = false

        var description: String {
            let text = message.split(whereSeparator: \.isNewline).first.map(String.init) ?? message
            return sqlState.map { "\(text) (SQLSTATE \($0))" } ?? text
        }
    }

    /// How long a statement may wait for the server's answer before the connection is dropped.
    /// The server's own bounds (`statementTimeout`, `lockTimeout`) answer first when it can
    /// answer at all; this one is for a server that cannot: its process stopped or its disk
    /// stalled, while its kernel still acknowledges the traffic, so TCP's timeouts never fire.
    var answerTimeout: Duration

    /// Connects with a URL or key=value string; what the URL says wins over navd's defaults: a
    /// 5 s connect timeout, the application name, and TCP keepalives and a user timeout, so a
    /// server that went silent (a partition, a dead host) fails the statement waiting on it in
    /// about 10 s instead of the system's two hours.
    init(url: String, answerTimeout: Duration = PostgresSessionStore.defaultAnswerTimeout) throws(Failure) {
        self.answerTimeout = answerTimeout
        let keywords = ["connect_timeout", "application_name", "keepalives", "keepalives_idle", "keepalives_interval",
                        "keepalives_count", "tcp_user_timeout", "dbname"]
        let values = ["5", "navd", "1", "4", "2", "3", "10000", url]
        let connection = Self.withCStrings(keywords) { keywordPointers in
            Self.withCStrings(values) { valuePointers in
                PQconnectdbParams(keywordPointers, valuePointers, 1)
            }
        }
        guard let connection else { throw Failure(message: "out of memory") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = String(cString: PQerrorMessage(connection))
            PQfinish(connection)
            throw Failure(message: message.isEmpty ? "cannot connect" : message)
        }
        handle = connection
        // Every statement is sent and awaited without blocking, so that none waits past its
        // deadline (`exchange`).
        PQsetnonblocking(handle, 1)
        // Kept across `PQreset`: notices are the connection's, not the socket's.
        PQsetNoticeReceiver(handle, { context, result in
            guard let context, let result else { return }
            let warnings = Unmanaged<CommitWarnings>.fromOpaque(context).takeUnretainedValue()
            // Only the warning that a synchronous standby's wait was given up: other warnings a
            // commit may bring (a notification queue filling up) say nothing of the commit.
            guard warnings.isListening, let severity = navd_pq_severity(result), String(cString: severity) == "WARNING",
                  let function = navd_pq_source_function(result), String(cString: function) == "SyncRepWaitForLSN" else { return }
            if warnings.heard == nil { warnings.heard = String(cString: PQresultErrorMessage(result)) }
        }, Unmanaged.passUnretained(warnings).toOpaque())
        try configure()
    }

    deinit { PQfinish(handle) }

    /// Every commit waits for the server's WAL flush, whatever the server's default says. And no
    /// wait is unbounded: navd's transactions take milliseconds, so one that waits seconds for a
    /// row lock (another node frozen mid-commit) fails, and its request is answered 503, rather
    /// than holding every claim or commit queued behind it; a transaction of navd's own left idle
    /// (its node stopped or cut off between two statements) is ended by the server, releasing
    /// its locks; no statement runs longer than a bound.
    private func configure() throws(Failure) {
        try execute("SET synchronous_commit TO on; SET lock_timeout TO '\(Self.lockTimeout)'; "
            + "SET idle_in_transaction_session_timeout TO '\(Self.idleInTransactionTimeout)'; "
            + "SET statement_timeout TO '\(Self.statementTimeout)'")
        configured = true
    }

    /// Whether `configure` succeeded since the connection was last opened: a connection that is
    /// up but unconfigured (its settings failed) is configured again before any use.
    private var configured = false

    /// How long a statement waits for a lock before it fails.
    static let lockTimeout = "2s"
    /// How long the server lets a transaction of navd's sit idle before ending it.
    static let idleInTransactionTimeout = "5s"
    /// How long any statement may run.
    static let statementTimeout = "15s"

    /// Reconnects when the server went away (a restart, a failover); prepared statements are
    /// per connection, so they are prepared again.
    func reconnectIfNeeded() throws(Failure) {
        if isConnected, configured { return }
        if !isConnected {
            configured = false
            dropped = false
            PQreset(handle)
            PQsetnonblocking(handle, 1)
            statements.removeAll()
            lane = CommitLane.make()
            guard PQstatus(handle) == CONNECTION_OK else {
                throw Failure(message: String(cString: PQerrorMessage(handle)), unanswered: true)
            }
        }
        try configure()
    }

    /// Whether the connection still stands: libpq noticed no loss, and no deadline dropped it.
    var isConnected: Bool { !dropped && PQstatus(handle) == CONNECTION_OK }

    /// Set when a statement outlived `answerTimeout`: the socket is shut, and the connection is
    /// opened again before its next use.
    private var dropped = false

    /// The socket, for a read source that wakes when notifications arrive; -1 without one.
    var socket: Int32 { PQsocket(handle) }

    /// Reads what the server sent without blocking and returns the notifications among it,
    /// as (channel, payload); throws when the connection is lost.
    func notifications() throws(Failure) -> [(channel: String, payload: String)] {
        guard PQconsumeInput(handle) == 1 else { throw Failure(message: String(cString: PQerrorMessage(handle))) }
        var received: [(channel: String, payload: String)] = []
        while let notification = PQnotifies(handle) {
            received.append((String(cString: notification.pointee.relname), String(cString: notification.pointee.extra)))
            PQfreemem(notification)
        }
        return received
    }

    /// How a transaction begins.
    enum Begin {
        /// Read committed, and it may write; its commit is tracked in the connection's lane, so
        /// a commit whose reply was lost can be looked up. Needs navd's tables.
        case readWrite
        /// Read committed, untracked: for the migration that creates the tables. Run again
        /// when its commit is lost, so it must be idempotent.
        case untracked
        /// One consistent view of the data, written by nothing.
        case snapshotReadOnly
    }

    /// Runs `body` in one transaction: committed if `keep` says so of what it returns (else
    /// rolled back), and rolled back when anything in it throws.
    ///
    /// A lost connection does not leave the outcome to chance. Lost before `COMMIT` was sent (a
    /// server restarted since the last use, which libpq learns only now), the transaction
    /// committed nothing: the connection is opened again and `body` run once more, so the
    /// first request after a restart is not refused. Lost while committing, the server may or
    /// may not have committed: once the connection is back, the lane says which (`settle`). A
    /// commit that happened is reported as one; one that did not is run once more, as above.
    /// Only when the database cannot say is the failure thrown as `outcomeUnknown`, which no
    /// caller may take for "nothing changed".
    func transaction<Value>(_ begin: Begin = .readWrite, keep: (Value) -> Bool = { _ in true },
                            _ body: () throws(Failure) -> Value) throws(Failure) -> Value {
        var attempt = 0
        while true {
            attempt += 1
            switch transactionOnce(begin, keep: keep, body) {
            case .done(let value):
                return value
            case .failed(let failure):
                // Not one that may have committed: run again, it could be stored twice.
                // Nor one the server left unanswered: a second try would wait as long again.
                guard attempt == 1, !isConnected, !failure.outcomeUnknown, !failure.unanswered else { throw failure }
                try reconnectIfNeeded()
            case .lostWhileCommitting(let mark, let value, let failure):
                switch settle(mark) {
                case .committed: return value
                case .notCommitted where attempt == 1: continue
                case .notCommitted: throw failure
                case .unknown(let reason):
                    throw Failure(message: "\(failure); whether the transaction committed is unknown: \(reason)", outcomeUnknown: true)
                }
            }
        }
    }

    /// What became of one attempt: done, failed (nothing committed), or cut off in its `COMMIT`.
    private enum Attempt<Value> {
        case done(Value)
        case failed(Failure)
        case lostWhileCommitting(CommitMark, value: Value, Failure)
    }

    private func transactionOnce<Value>(_ begin: Begin, keep: (Value) -> Bool, _ body: () throws(Failure) -> Value) -> Attempt<Value> {
        var mark: CommitMark?
        do throws(Failure) {
            switch begin {
            case .readWrite:
                let now = ContinuousClock.now
                if lane.needsRegistering(at: now) { try registerLane(at: now) }
                // One round trip: the lane's row is raised, and locked until the transaction ends.
                var count = try optionalInteger(ofSimpleQuery: "BEGIN; " + lane.raise)
                if count == nil {
                    // The row is gone (a clock that jumped a day, a table emptied by hand): made
                    // again, in a commit of its own, then raised.
                    try execute("ROLLBACK")
                    try registerLane(at: now)
                    count = try optionalInteger(ofSimpleQuery: "BEGIN; " + lane.raise)
                }
                guard let count else { throw Failure(message: "the connection's commit lane cannot be made") }
                mark = CommitMark(lane: lane.id, count: count)
            case .untracked: try execute("BEGIN")
            case .snapshotReadOnly: try execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            }
        } catch {
            // `BEGIN` may have opened the transaction that the statement after it failed in.
            if isConnected { try? execute("ROLLBACK") }
            return .failed(error)
        }
        let value: Value
        do throws(Failure) {
            value = try body()
        } catch {
            try? execute("ROLLBACK")
            return .failed(error)
        }
        guard keep(value) else {
            // A rollback whose connection is lost is one all the same: the server ends the
            // transaction with the connection.
            do throws(Failure) { try execute("ROLLBACK") } catch { if isConnected { return .failed(error) } }
            return .done(value)
        }
        do throws(Failure) {
            try commit()
            return .done(value)
        } catch where error.outcomeUnknown {
            return .failed(error)
        } catch {
            guard let mark, !isConnected else { return .failed(error) }
            return .lostWhileCommitting(mark, value: value, error)
        }
    }

    /// Makes sure of the lane's row, in a commit of its own.
    private func registerLane(at now: ContinuousClock.Instant) throws(Failure) {
        try execute(lane.register)
        lane.noteRegistered(at: now)
    }

    /// What a tracked transaction set its lane's count to.
    private struct CommitMark {
        let lane: String
        let count: Int
    }

    /// How long a lost commit waits for the database to be back, and for the transaction's lane.
    private static let settleReconnection: Duration = .seconds(5)
    private static let settleLockTimeout = "6s"

    private enum Settled {
        case committed
        case notCommitted
        case unknown(String)
    }

    /// What became of the transaction that set `mark`, asked on a new connection: the lane's
    /// count is the one it set if, and only if, it committed, since nothing else writes that
    /// row. Locking the row waits for the transaction if its server process is still finishing
    /// it (a slow flush, a synchronous standby), for `settleLockTimeout` at most; still unfinished
    /// then, the outcome is unknown. This asks the data, not the server's transaction ids, so
    /// it holds across a crash and restart (which hands ids out again) and a failover (a
    /// standby promoted without the commit has not got it, and never will).
    private func settle(_ mark: CommitMark) -> Settled {
        // A server that crashed takes a moment to come back (recovery): asked again for a while.
        let deadline = ContinuousClock.now + Self.settleReconnection
        while true {
            do throws(Failure) {
                try reconnectIfNeeded()
                break
            } catch {
                guard ContinuousClock.now < deadline else { return .unknown("the database cannot be reached (\(error))") }
                usleep(250_000)
            }
        }
        do throws(Failure) {
            var count: Int?
            // Longer than the server keeps a transaction idle: one whose `COMMIT` never arrived
            // is ended by then, and answers "not committed" rather than "unknown".
            try execute("SET lock_timeout TO '\(Self.settleLockTimeout)'")
            defer {
                // Not restored, the connection is set up again before its next use.
                do throws(Failure) { try execute("SET lock_timeout TO '\(Self.lockTimeout)'") } catch { configured = false }
            }
            try run("SELECT commits FROM navd_commit_lanes WHERE lane = $1 FOR UPDATE", [.text(mark.lane)]) { count = $0.integer(0) }
            switch count {
            case mark.count: return .committed
            case mark.count - 1: return .notCommitted
            default: return .unknown("its lane reads \(count.map(String.init) ?? "nothing"), not \(mark.count - 1) or \(mark.count)")
            }
        } catch {
            return .unknown("the database did not say (\(error))")
        }
    }

    /// `COMMIT`, and what it said besides. A commit whose wait for a synchronous standby's
    /// confirmation was given up (cancelled or terminated by an administrator, a fast shutdown)
    /// did not go as navd asked: the server kept it without the standby's copy, and says so
    /// only in a warning. Not durable as configured, not undone either: its outcome is unknown.
    private func commit() throws(Failure) {
        warnings.heard = nil
        warnings.isListening = true
        defer { warnings.isListening = false }
        var lost: Failure?
        do throws(Failure) { try execute("COMMIT") } catch { lost = error }
        // Warned, then cut off (an administrator's termination): the warning is what counts.
        if let warning = warnings.heard {
            throw Failure(message: "the commit ended with a warning: \(warning.split(whereSeparator: \.isNewline).first ?? "")",
                          outcomeUnknown: true)
        }
        if let lost { throw lost }
    }

    /// The integer in the first column of the last result of `sql`, a simple query (several
    /// statements allowed, one round trip); nil when it returned no row.
    private func optionalInteger(ofSimpleQuery sql: String) throws(Failure) -> Int? {
        let result = try exchange { PQsendQuery(handle, sql) }
        defer { PQclear(result) }
        try check(result)
        guard PQntuples(result) > 0 else { return nil }
        guard PQntuples(result) == 1, let text = PQgetvalue(result, 0, 0), let value = Int(String(cString: text)) else {
            throw Failure(message: "expected one integer from \(sql)")
        }
        return value
    }

    /// Runs SQL with no parameters (several statements allowed).
    func execute(_ sql: String) throws(Failure) {
        let result = try exchange { PQsendQuery(handle, sql) }
        defer { PQclear(result) }
        try check(result)
    }

    /// Runs one statement with `values` bound in order, calling `row` for each result row.
    func run(_ sql: String, _ values: [PostgresValue] = [], row: (PostgresRow) throws(Failure) -> Void = { _ in }) throws(Failure) {
        let name = try prepared(sql, types: values.map(\.type))
        let encoded = values.map(\.bytes)
        let total = encoded.reduce(0) { $0 + ($1?.count ?? 0) }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(total, 1), alignment: 1)
        defer { buffer.deallocate() }
        var pointers: [UnsafePointer<CChar>?] = []
        var lengths: [Int32] = []
        var offset = 0
        for bytes in encoded {
            guard let bytes else {
                pointers.append(nil)
                lengths.append(0)
                continue
            }
            let slice = UnsafeMutableRawBufferPointer(rebasing: buffer[offset..<(offset + bytes.count)])
            bytes.withUnsafeBytes { slice.copyMemory(from: $0) }
            pointers.append((buffer.baseAddress.map { UnsafeRawPointer($0 + offset) })?.assumingMemoryBound(to: CChar.self))
            lengths.append(Int32(bytes.count))
            offset += bytes.count
        }
        let formats = [Int32](repeating: 1, count: values.count)
        let result = try exchange { PQsendQueryPrepared(handle, name, Int32(values.count), pointers, lengths, formats, 1) }
        defer { PQclear(result) }
        try check(result)
        for index in 0..<PQntuples(result) { try row(PostgresRow(result: result, row: index)) }
    }

    /// The single integer a query returns.
    func integer(_ sql: String, _ values: [PostgresValue] = []) throws(Failure) -> Int {
        var answer = 0
        try run(sql, values) { row in answer = row.integer(0) }
        return answer
    }

    private func prepared(_ sql: String, types: [Oid]) throws(Failure) -> String {
        if let name = statements[sql] { return name }
        let name = "navd_\(statements.count + 1)"
        let result = try exchange { PQsendPrepare(handle, name, sql, Int32(types.count), types) }
        defer { PQclear(result) }
        try check(result)
        statements[sql] = name
        return name
    }

    /// What the statement `send` sends (a `PQsend…` call) came to: its last result, or its
    /// first error, as `PQexec` would return, waited for until `answerTimeout` has passed. The
    /// caller clears it. At the deadline the connection is dropped: its socket is shut, so the
    /// server ends the transaction whenever it wakes, and the next use connects again.
    private func exchange(_ send: () -> Int32) throws(Failure) -> OpaquePointer {
        guard !dropped else { throw Failure(message: "the connection was dropped") }
        guard send() == 1 else { throw lostConnection() }
        do throws(Failure) {
            return try awaitResult(until: ContinuousClock.now + answerTimeout)
        } catch {
            // Whatever cut the wait short left libpq in the middle of a statement: the
            // connection is of no further use, even where libpq has not noticed.
            if isConnected { drop() }
            throw error
        }
    }

    /// The rest of `exchange`, once the statement is sent.
    private func awaitResult(until deadline: ContinuousClock.Instant) throws(Failure) -> OpaquePointer {
        // Sent in full first: a large statement to a server that stopped reading must not block.
        while true {
            let flushed = PQflush(handle)
            if flushed == 0 { break }
            guard flushed == 1 else { throw lostConnection() }
            let ready = try waitForSocket(Int16(POLLIN | POLLOUT), until: deadline)
            // libpq asks for input to be read while it waits to write (the server may be
            // sending notices, and would stop reading until they are taken).
            if ready & Int16(POLLIN | POLLERR | POLLHUP) != 0, PQconsumeInput(handle) != 1 { throw lostConnection() }
        }
        var kept: OpaquePointer?
        while true {
            while PQisBusy(handle) == 1 {
                do throws(Failure) {
                    _ = try waitForSocket(Int16(POLLIN), until: deadline)
                } catch {
                    PQclear(kept)
                    throw error
                }
                guard PQconsumeInput(handle) == 1 else {
                    PQclear(kept)
                    throw lostConnection()
                }
            }
            guard let result = PQgetResult(handle) else { break }
            if let earlier = kept, PQresultStatus(earlier) == PGRES_FATAL_ERROR {
                PQclear(result)
            } else {
                PQclear(kept)
                kept = result
            }
        }
        guard let kept else { throw lostConnection() }
        return kept
    }

    /// Waits until the socket is ready for `events`; past `deadline`, drops the connection and
    /// throws a failure that says so.
    private func waitForSocket(_ events: Int16, until deadline: ContinuousClock.Instant) throws(Failure) -> Int16 {
        let socket = PQsocket(handle)
        guard socket >= 0 else { throw lostConnection() }
        // Over TLS, a record OpenSSL has read but libpq has not taken yet is invisible to poll():
        // libpq takes one record per read. Its own waits look there first, and so does this one.
        if events & Int16(POLLIN) != 0, navd_pq_ssl_pending(handle) > 0 { return Int16(POLLIN) }
        while true {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else {
                drop()
                throw Failure(message: "the database did not answer within \(answerTimeout.seconds) s; the connection was dropped",
                              unanswered: true)
            }
            var descriptor = pollfd(fd: socket, events: events, revents: 0)
            let milliseconds = Int32(clamping: Int((remaining.seconds * 1000).rounded(.up)))
            let ready = poll(&descriptor, 1, milliseconds)
            if ready > 0 { return descriptor.revents }
            guard ready == 0 || errno == EINTR else { throw Failure(message: "poll: \(String(cString: strerror(errno)))") }
        }
    }

    /// Shuts the socket, so the server ends the transaction whenever it reads again, and marks
    /// the connection to be opened again before its next use.
    private func drop() {
        dropped = true
        let socket = PQsocket(handle)
        if socket >= 0 { shutdown(socket, Int32(SHUT_RDWR)) }
    }

    /// libpq's own account of why the connection failed.
    private func lostConnection() -> Failure {
        let message = String(cString: PQerrorMessage(handle))
        return Failure(message: message.isEmpty ? "the connection was lost" : message)
    }

    private func check(_ result: OpaquePointer) throws(Failure) {
        let status = PQresultStatus(result)
        guard status != PGRES_COMMAND_OK, status != PGRES_TUPLES_OK else { return }
        let message = String(cString: PQresultErrorMessage(result))
        throw Failure(message: message.isEmpty ? String(cString: PQerrorMessage(handle)) : message,
                      sqlState: navd_pq_sqlstate(result).map { String(cString: $0) })
    }

    /// C strings for libpq's parameter arrays (NULL-terminated), alive for `body`.
    private static func withCStrings<Result>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> Result) -> Result {
        var copies = strings.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        copies.append(nil)
        return body(copies.map { $0.map { UnsafePointer($0) } })
    }
}

/// A value bound to a statement, in PostgreSQL's binary format.
enum PostgresValue {
    case integer(Int)
    case real(Double)
    case text(String)
    case bytes([UInt8])
    /// A NULL `bytea`.
    case noBytes

    /// The parameter's type OID (pg_type): int8, float8, text, bytea.
    var type: Oid {
        switch self {
        case .integer: 20
        case .real: 701
        case .text: 25
        case .bytes, .noBytes: 17
        }
    }

    /// Network byte order for numbers, the bytes themselves for text and bytea; `nil` for NULL.
    var bytes: [UInt8]? {
        switch self {
        case .integer(let number): withUnsafeBytes(of: Int64(number).bigEndian) { Array($0) }
        case .real(let number): withUnsafeBytes(of: number.bitPattern.bigEndian) { Array($0) }
        case .text(let text): Array(text.utf8)
        case .bytes(let bytes): bytes
        case .noBytes: nil
        }
    }
}

/// One row of a result in binary format, read by column.
struct PostgresRow {
    fileprivate let result: OpaquePointer
    fileprivate let row: Int32

    func isNull(_ column: Int32) -> Bool { PQgetisnull(result, row, column) != 0 }

    func bytes(_ column: Int32) -> [UInt8] {
        let count = Int(PQgetlength(result, row, column))
        guard count > 0, let pointer = PQgetvalue(result, row, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    func text(_ column: Int32) -> String { String(decoding: bytes(column), as: UTF8.self) }

    /// An int8 (or a shorter integer, sign-extended); 0 for NULL.
    func integer(_ column: Int32) -> Int {
        let raw = bytes(column)
        guard !raw.isEmpty else { return 0 }
        var value: Int64 = raw[0] & 0x80 == 0 ? 0 : -1
        for byte in raw { value = value << 8 | Int64(byte) }
        return Int(value)
    }

    func real(_ column: Int32) -> Double {
        let raw = bytes(column)
        guard raw.count == 8 else { return 0 }
        return Double(bitPattern: raw.reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
    }
}

/// The first warning a connection's notice receiver heard while listening; used on the
/// connection's thread only, inside libpq's calls.
private final class CommitWarnings {
    var isListening = false
    var heard: String?
}
