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
    /// The server this connection reached: the fate of a transaction cut off in its `COMMIT` can
    /// be asked only of the server it ran on, and trusted only as far as that server kept it.
    private var server = ServerIdentity(cluster: nil, started: "")
    /// Its server process, kept while connected: libpq forgets it once the connection is lost.
    private var backend: Int32 = 0

    /// What the server (or libpq) said, and its SQLSTATE when there was one.
    struct Failure: Error, CustomStringConvertible {
        let message: String
        var sqlState: String?
        /// The connection was lost while committing and whether the commit happened could not be
        /// learned: its writes may be stored, or not.
        var outcomeUnknown = false

        var description: String {
            let text = message.split(whereSeparator: \.isNewline).first.map(String.init) ?? message
            return sqlState.map { "\(text) (SQLSTATE \($0))" } ?? text
        }
    }

    /// Connects with a URL or key=value string; what the URL says wins over navd's defaults: a
    /// 5 s connect timeout, the application name, and TCP keepalives and a user timeout, so a
    /// server that went silent (a partition, a dead host) fails the statement waiting on it in
    /// about 10 s instead of the system's two hours.
    init(url: String) throws(Failure) {
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
        var started = ""
        try run("SELECT pg_postmaster_start_time()::text") { started = $0.text(0) }
        // The timeline is the first part of a WAL file's name; a standby has none of its own yet.
        // A service that does not let navd read these (some managed ones) leaves it unknown.
        var cluster: String?
        try? run("""
            SELECT (SELECT system_identifier FROM pg_control_system())::text || '/'
                || CASE WHEN pg_is_in_recovery() THEN 'standby' ELSE left(pg_walfile_name(pg_current_wal_lsn()), 8) END
            """) { cluster = $0.text(0) }
        server = ServerIdentity(cluster: cluster, started: started)
        backend = PQbackendPID(handle)
    }

    /// Which server a connection reached: its cluster and timeline, which a failover changes
    /// (nil when the server does not say), and when it started, which a restart changes.
    private struct ServerIdentity: Equatable {
        let cluster: String?
        let started: String
    }

    /// How long a statement waits for a lock before it fails.
    static let lockTimeout = "2s"
    /// How long the server lets a transaction of navd's sit idle before ending it.
    static let idleInTransactionTimeout = "5s"
    /// How long any statement may run.
    static let statementTimeout = "15s"

    /// Reconnects when the server went away (a restart, a failover); prepared statements are
    /// per connection, so they are prepared again.
    func reconnectIfNeeded() throws(Failure) {
        guard PQstatus(handle) != CONNECTION_OK else { return }
        PQreset(handle)
        statements.removeAll()
        guard PQstatus(handle) == CONNECTION_OK else { throw Failure(message: String(cString: PQerrorMessage(handle))) }
        try configure()
    }

    /// Whether the connection still stands (libpq noticed no loss).
    var isConnected: Bool { PQstatus(handle) == CONNECTION_OK }

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
    enum Begin: String {
        /// Read committed, and it may write: its id is taken at `BEGIN`, so a commit whose reply
        /// was lost can be looked up.
        case readWrite = "BEGIN; SELECT txid_current()"
        /// One consistent view of the data, written by nothing.
        case snapshotReadOnly = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
    }

    /// Runs `body` in one transaction: committed if `keep` says so of what it returns (else
    /// rolled back), and rolled back when anything in it throws.
    ///
    /// A lost connection does not leave the outcome to chance. Lost before `COMMIT` was sent (a
    /// server restarted since the last use, which libpq learns only now), the transaction
    /// committed nothing: the connection is opened again and `body` run once more, so the
    /// first request after a restart is not refused. Lost while committing, the server may or
    /// may not have committed: once the connection is back, the transaction's id says which
    /// (`settle`). A commit that happened is reported as one; one that did not is run once more,
    /// as above. Only when the server cannot say is the failure thrown as `outcomeUnknown`,
    /// which no caller may take for "nothing changed".
    func transaction<Value>(_ begin: Begin = .readWrite, keep: (Value) -> Bool = { _ in true },
                            _ body: () throws(Failure) -> Value) throws(Failure) -> Value {
        var attempt = 0
        while true {
            attempt += 1
            switch transactionOnce(begin, keep: keep, body) {
            case .done(let value):
                return value
            case .failed(let failure):
                guard attempt == 1, !isConnected else { throw failure }
                try reconnectIfNeeded()
            case .lostWhileCommitting(let id, let value, let failure):
                switch settle(LostCommit(id: id, backend: backend, server: server)) {
                case .committed: return value
                case .aborted where attempt == 1: continue
                case .aborted: throw failure
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
        case lostWhileCommitting(id: Int, value: Value, Failure)
    }

    private func transactionOnce<Value>(_ begin: Begin, keep: (Value) -> Bool, _ body: () throws(Failure) -> Value) -> Attempt<Value> {
        var id: Int?
        do throws(Failure) {
            if begin == .readWrite { id = try integer(ofSimpleQuery: begin.rawValue) } else { try execute(begin.rawValue) }
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
            try execute("COMMIT")
            return .done(value)
        } catch {
            guard let id, !isConnected else { return .failed(error) }
            return .lostWhileCommitting(id: id, value: value, error)
        }
    }

    /// A transaction cut off in its `COMMIT`: its id, the server process that ran it, and the
    /// server it ran on.
    private struct LostCommit {
        let id: Int
        let backend: Int32
        let server: ServerIdentity
    }

    private enum Settled {
        case committed
        case aborted
        case unknown(String)
    }

    /// What became of `lost`, asked on a new connection. Only the server it ran on can say: after
    /// a failover (another cluster or timeline) its id may name another transaction there. A
    /// server that restarted since may have given the id to another transaction (ids are handed
    /// out again from the last one its log kept), so only "aborted" still holds: a commit that
    /// reached the log keeps its id. Its server process may still be finishing it (waiting for
    /// a lock at commit, running deferred work): after a moment that process is ended, which
    /// settles the transaction one way or the other, and the answer is asked again. Still
    /// unsettled after that (a flush that hangs, a synchronous standby that does not answer),
    /// it is unknown.
    private func settle(_ lost: LostCommit) -> Settled {
        do throws(Failure) {
            try reconnectIfNeeded()
        } catch {
            return .unknown("the server cannot be reached (\(error))")
        }
        guard let before = lost.server.cluster, server.cluster == before else {
            return .unknown("the server cannot say which server it is, or it changed since (a failover)")
        }
        let restarted = server.started != lost.server.started
        do throws(Failure) {
            for round in 0..<Self.settleRounds {
                var status = ""
                do throws(Failure) {
                    try run("SELECT coalesce(txid_status($1), 'unknown')", [.integer(lost.id)]) { status = $0.text(0) }
                } catch where error.sqlState == "22023" {
                    // "In the future": a restarted server whose log never got as far as the
                    // transaction, which therefore never committed.
                    return .aborted
                }
                switch status {
                case "aborted": return .aborted
                case "committed" where restarted, "in progress" where restarted:
                    return .unknown("the server restarted since, and the transaction's id may name another one now")
                case "committed": return .committed
                case "in progress":
                    if round == Self.settleRounds / 4 {
                        // Only the process still running this very transaction (a process id is
                        // reused), and not one waiting for a synchronous standby: ended there, the
                        // commit would stand without the copy the server is configured to wait for.
                        try run("""
                            SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                            WHERE pid = $1 AND backend_xid::text = $2 AND wait_event IS DISTINCT FROM 'SyncRep'
                            """, [.integer(Int(lost.backend)), .text(String(lost.id & 0xFFFF_FFFF))])
                    }
                    usleep(50_000)
                default: return .unknown("the server no longer knows the transaction (\(status))")
                }
            }
            return .unknown("the transaction is still in progress on the server")
        } catch {
            return .unknown("the server did not answer (\(error))")
        }
    }

    /// How many times, 50 ms apart, the status of a lost commit is asked: its process is ended
    /// after a quarter of them.
    private static let settleRounds = 40

    /// The integer in the first column of the last result of `sql`, a simple query (several
    /// statements allowed, one round trip).
    private func integer(ofSimpleQuery sql: String) throws(Failure) -> Int {
        let result = PQexec(handle, sql)
        defer { PQclear(result) }
        try check(result)
        guard let result, PQntuples(result) == 1, let text = PQgetvalue(result, 0, 0), let value = Int(String(cString: text)) else {
            throw Failure(message: "expected one integer from \(sql)")
        }
        return value
    }

    /// Runs SQL with no parameters (several statements allowed).
    func execute(_ sql: String) throws(Failure) {
        let result = PQexec(handle, sql)
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
        let result = PQexecPrepared(handle, name, Int32(values.count), pointers, lengths, formats, 1)
        defer { PQclear(result) }
        try check(result)
        guard let result else { return }
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
        let result = PQprepare(handle, name, sql, Int32(types.count), types)
        defer { PQclear(result) }
        try check(result)
        statements[sql] = name
        return name
    }

    private func check(_ result: OpaquePointer?) throws(Failure) {
        guard let result else { throw Failure(message: String(cString: PQerrorMessage(handle))) }
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
