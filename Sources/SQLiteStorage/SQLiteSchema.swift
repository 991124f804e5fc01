/// The store's tables, and how a database file proves it is navd's.
///
/// A session is its row in `sessions` (what never changes, plus its last snapshot), the
/// transactions since that snapshot, and the events kept for `Last-Event-ID`. A transaction
/// row holds a JSON Patch, not the state, so a commit writes what changed, not the session
/// whole; a new snapshot replaces the row's state and deletes the transactions it covers, so
/// what a restart replays stays short. Events are trimmed to the event buffer's bounds at
/// each snapshot, which keeps the file from growing with a session's age.
///
/// Rowid tables throughout: state and event blobs can be large, and SQLite keeps large rows
/// better out of a clustered (WITHOUT ROWID) index.
enum SQLiteSchema {
    /// `PRAGMA application_id`: the bytes "navd", so a stranger's database is refused.
    static let applicationID = 0x6E61_7664
    /// `PRAGMA user_version`: bumped by every change to the tables below.
    static let version = 1

    /// Run once, in a transaction, on an empty file.
    static let create = """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            token_hash BLOB NOT NULL,
            feature TEXT NOT NULL,
            created REAL NOT NULL,
            version INTEGER NOT NULL,
            last_sequence INTEGER NOT NULL,
            next_serial INTEGER NOT NULL,
            state BLOB NOT NULL,
            tree BLOB NOT NULL,
            extras BLOB NOT NULL
        );
        CREATE TABLE transactions (
            ordinal INTEGER PRIMARY KEY,
            session TEXT NOT NULL,
            version INTEGER NOT NULL,
            last_sequence INTEGER NOT NULL,
            next_serial INTEGER NOT NULL,
            patch BLOB NOT NULL,
            extras BLOB
        );
        CREATE INDEX transactions_by_session ON transactions (session, ordinal);
        CREATE TABLE events (
            session TEXT NOT NULL,
            sequence INTEGER NOT NULL,
            kind TEXT NOT NULL,
            data BLOB NOT NULL,
            UNIQUE (session, sequence)
        );
        CREATE TABLE probes (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            written REAL NOT NULL
        );
        PRAGMA application_id = \(applicationID);
        PRAGMA user_version = \(version);
        """
}
