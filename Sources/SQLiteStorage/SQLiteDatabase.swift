import CSQLite

/// One connection to a SQLite database: statements prepared once and reused, errors carried
/// with SQLite's own message. Not thread-safe; its owner serialises every use.
final class SQLiteDatabase {
    fileprivate let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]

    /// SQLite's result code and message.
    struct Failure: Error, CustomStringConvertible {
        let code: Int32
        let message: String

        var description: String { "\(message) (SQLite \(code))" }
        /// The disk is full or failed: the store is unavailable, not broken.
        var isDiskProblem: Bool { [SQLITE_FULL, SQLITE_IOERR, SQLITE_CANTOPEN, SQLITE_READONLY].contains(code & 0xFF) }
        var isBusy: Bool { [SQLITE_BUSY, SQLITE_LOCKED].contains(code & 0xFF) }
    }

    /// - Parameter readOnly: opens a file that must exist, and writes nothing to it.
    init(path: String, readOnly: Bool = false) throws(Failure) {
        var handle: OpaquePointer?
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE) | SQLITE_OPEN_NOMUTEX
        let code = sqlite3_open_v2(path, &handle, flags, nil)
        guard code == SQLITE_OK, let handle else {
            let message = handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(handle)
            throw Failure(code: code, message: message)
        }
        self.handle = handle
        sqlite3_extended_result_codes(handle, 1)
    }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    /// Runs SQL that returns no rows (several statements allowed).
    func execute(_ sql: String) throws(Failure) {
        var message: UnsafeMutablePointer<CChar>?
        let code = sqlite3_exec(handle, sql, nil, nil, &message)
        guard code == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? String(cString: sqlite3_errmsg(handle))
            sqlite3_free(message)
            throw Failure(code: code, message: text)
        }
    }

    /// Runs one statement with `values` bound in order, calling `row` for each result row.
    func run(_ sql: String, _ values: [SQLiteValue] = [], row: (SQLiteRow) throws(Failure) -> Void = { _ in }) throws(Failure) {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let code: Int32 = switch value {
            case .integer(let number): sqlite3_bind_int64(statement, index, Int64(number))
            case .real(let number): sqlite3_bind_double(statement, index, number)
            case .text(let text): sqlite3_bind_text(statement, index, text, -1, navd_sqlite_transient())
            case .utf8(let bytes):
                bytes.withUnsafeBytes { buffer in
                    // Zero-length text is still text, not NULL: bind a valid pointer.
                    let text = buffer.baseAddress.map { $0.assumingMemoryBound(to: CChar.self) } ?? UnsafePointer(bitPattern: 1)
                    return sqlite3_bind_text64(statement, index, text, sqlite3_uint64(buffer.count), navd_sqlite_transient(), UInt8(SQLITE_UTF8))
                }
            case .null: sqlite3_bind_null(statement, index)
            case .blob(let bytes):
                bytes.withUnsafeBytes { buffer in
                    // A zero-length blob must still be a blob, not NULL: bind a valid pointer.
                    sqlite3_bind_blob64(statement, index, buffer.baseAddress ?? UnsafeRawPointer(bitPattern: 1), sqlite3_uint64(buffer.count), navd_sqlite_transient())
                }
            }
            guard code == SQLITE_OK else { throw failure(code) }
        }
        while true {
            let code = sqlite3_step(statement)
            switch code {
            case SQLITE_DONE: return
            case SQLITE_ROW: try row(SQLiteRow(statement: statement))
            default: throw failure(code)
            }
        }
    }

    /// The rowid of the row the last `INSERT` made.
    var lastInsertedRow: Int64 { sqlite3_last_insert_rowid(handle) }

    /// The single integer a query returns (a pragma, a count).
    func integer(_ sql: String, _ values: [SQLiteValue] = []) throws(Failure) -> Int {
        var result = 0
        try run(sql, values) { row in result = row.integer(0) }
        return result
    }

    /// The single text a query returns (a pragma).
    func text(_ sql: String) throws(Failure) -> String {
        var result = ""
        try run(sql) { row in result = row.text(0) }
        return result
    }

    private func prepared(_ sql: String) throws(Failure) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        let code = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard code == SQLITE_OK, let statement else { throw failure(code) }
        statements[sql] = statement
        return statement
    }

    private func failure(_ code: Int32) -> Failure {
        Failure(code: code, message: String(cString: sqlite3_errmsg(handle)))
    }
}

/// An online copy of one database into another (`sqlite3_backup`), a few pages at a time, so
/// whoever writes the source between steps is not held up for the whole copy. What the source's
/// own connection writes meanwhile reaches the copy too; the copy is whole once `step` says so.
final class SQLiteBackup {
    private let handle: OpaquePointer
    /// Kept open until the copy ends: a source closed under a running copy would be misuse.
    private let source: SQLiteDatabase
    let destination: SQLiteDatabase

    init(from source: SQLiteDatabase, to destination: SQLiteDatabase) throws(SQLiteDatabase.Failure) {
        guard let handle = sqlite3_backup_init(destination.handle, "main", source.handle, "main") else {
            throw SQLiteDatabase.Failure(code: sqlite3_errcode(destination.handle), message: String(cString: sqlite3_errmsg(destination.handle)))
        }
        self.handle = handle
        self.source = source
        self.destination = destination
    }

    private var finished = false

    deinit {
        finish()
    }

    /// Ends the copy, whole or not, and lets go of the source: on the thread that uses the
    /// source, since the copy is registered with it.
    func finish() {
        guard !finished else { return }
        finished = true
        sqlite3_backup_finish(handle)
    }

    /// Copies up to `pages` more pages; true once the copy is whole.
    func step(pages: Int32) throws(SQLiteDatabase.Failure) -> Bool {
        guard !finished else { return true }
        let code = sqlite3_backup_step(handle, pages)
        switch code {
        case SQLITE_DONE: return true
        case SQLITE_OK, SQLITE_BUSY, SQLITE_LOCKED: return false
        default:
            // The destination's message when it has one (a full disk); else SQLite's name for it.
            let message = sqlite3_errcode(destination.handle) == SQLITE_OK ? String(cString: sqlite3_errstr(code)) : String(cString: sqlite3_errmsg(destination.handle))
            throw SQLiteDatabase.Failure(code: code, message: message)
        }
    }
}

/// A value bound to a statement.
enum SQLiteValue {
    case integer(Int)
    case real(Double)
    case text(String)
    /// Text already encoded as UTF-8, bound without a copy into a `String`.
    case utf8([UInt8])
    case blob([UInt8])
    case null
}

/// The current row of a statement, read by column.
struct SQLiteRow {
    fileprivate let statement: OpaquePointer

    func integer(_ column: Int32) -> Int { Int(sqlite3_column_int64(statement, column)) }
    func real(_ column: Int32) -> Double { sqlite3_column_double(statement, column) }
    func isNull(_ column: Int32) -> Bool { sqlite3_column_type(statement, column) == SQLITE_NULL }

    func text(_ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(statement, column) else { return "" }
        let count = Int(sqlite3_column_bytes(statement, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(statement, column))
        guard count > 0, let pointer = sqlite3_column_blob(statement, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }
}
