/// The store's tables, and how a database file proves it is navd's.
///
/// A session is its row in `sessions` (what never changes, plus its last snapshot) and its rows
/// in `journal`, one per committed batch: the batch's JSON Patch of the state and the events it
/// sent. A commit therefore writes what changed, not the session whole, and it writes one row
/// per batch: every row a write adds costs a page of its table's index, and pages are what a
/// commit syncs, so the events live in their batch's row instead of a table of their own.
///
/// A new snapshot replaces the session row's state; journal rows it covers are kept only while
/// their events are within the event buffer's bounds (clients resume from them), so what a
/// restart replays stays short and the file does not grow with a session's age.
///
/// The journal has no index on the session: every row a commit adds lands on the table's last
/// page, and which rows are whose is kept in memory (`JournalIndex`).
///
/// When each session was last used is a table of its own (`uses`), apart from the sessions'
/// large rows: it is rewritten for every session as navd stops, and small rows keep that write
/// to a few pages. Every other table is a rowid table: state and event blobs can be
/// large, and SQLite keeps large rows better out of a clustered (WITHOUT ROWID) index.
enum SQLiteSchema {
    /// `PRAGMA application_id`: the bytes "navd", so a stranger's database is refused.
    static let applicationID = 0x6E61_7664
    /// `PRAGMA user_version`: bumped by every change to the tables below.
    static let version = 6

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
        CREATE TABLE probes (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            written REAL NOT NULL
        );
        \(journal)
        \(uses)
        \(clock)
        INSERT INTO clock (id, seconds, closed) VALUES (1, 0, 0);
        PRAGMA application_id = \(applicationID);
        PRAGMA user_version = \(version);
        """

    /// `events` is a JSON array of `[sequence, kind, data]`, oldest first; `event_bytes` is the
    /// sum of the events' `data` lengths, what the event buffer's byte bound counts, and
    /// `bytes_through` the session's running total of it, so the rows outside the buffer are
    /// found from the oldest end without summing the ones inside it.
    private static let journal = """
        CREATE TABLE journal (
            ordinal INTEGER PRIMARY KEY,
            session TEXT NOT NULL,
            version INTEGER NOT NULL,
            last_sequence INTEGER NOT NULL,
            next_serial INTEGER NOT NULL,
            patch BLOB NOT NULL,
            extras BLOB,
            events TEXT NOT NULL,
            event_bytes INTEGER NOT NULL,
            bytes_through INTEGER NOT NULL
        );
        """

    /// `at` is when the session was last recorded as used (a request, or an open stream), by
    /// the store's clock: a restart counts its idle time from there.
    private static let uses = """
        CREATE TABLE uses (
            session TEXT PRIMARY KEY,
            at REAL NOT NULL
        ) WITHOUT ROWID;
        """

    /// The store's clock, in seconds: it runs only while navd has the store open (kept with the
    /// idle times written at a stop, and at close), so the time navd was down is nobody's idle time. `closed`
    /// says the last process wrote its sessions' idle times as it stopped (cleared at every
    /// start): after a crash they are not known, and a restart counts as a use. `copied` marks a
    /// copy (`backUp`): the store it came from went on issuing ids after it (`continueFromCopy`).
    private static let clock = """
        CREATE TABLE clock (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            seconds REAL NOT NULL,
            closed INTEGER NOT NULL,
            copied INTEGER NOT NULL DEFAULT 0
        );
        """

    /// How far past the wall clock's mark (`continueFromCopy`) a copy's sessions move their
    /// counters when navd first opens it: more versions, event ids and element ids than a
    /// session issues between a copy and its restore, with room for a clock set back by days.
    static let gapAfterCopy = 1_000_000_000_000

    /// Versions and ids a session may issue a second, at most, as the mark counts them.
    static let idsPerSecond = 1_000_000

    /// Run once, in the opening transaction, on a copy. The store the copy was taken of went on
    /// issuing versions and ids, and so may an earlier restore of the same copy: each session's
    /// version, last event id and next element id move on to the wall clock's mark (seconds
    /// since 1970 × `idsPerSecond`, which no restore before this one can have reached) plus
    /// `gapAfterCopy`, or by `gapAfterCopy` when they are past the mark already (a copy of a
    /// restored copy). A session's snapshot, journal rows and their events move alike, so its
    /// history is as unbroken as it was; they stay far below the counters' bound (2^53) for
    /// centuries. Rows at or below the snapshot, kept only for a client resuming from one of
    /// their events, go: every id a client holds is now below the session's first.
    static func continueFromCopy(secondsSince1970 now: Int) -> String {
        let mark = now * idsPerSecond
        func moved(_ column: String) -> String {
            "(max(sessions.\(column), \(mark)) + \(gapAfterCopy) - sessions.\(column))"
        }
        return """
            DELETE FROM journal WHERE version <= (SELECT version FROM sessions WHERE sessions.id = journal.session);
            UPDATE journal SET
                version = version + (SELECT \(moved("version")) FROM sessions WHERE sessions.id = journal.session),
                last_sequence = last_sequence + (SELECT \(moved("last_sequence")) FROM sessions WHERE sessions.id = journal.session),
                next_serial = next_serial + (SELECT \(moved("next_serial")) FROM sessions WHERE sessions.id = journal.session),
                events = (SELECT json_group_array(json_array((event.value ->> 0) + \(moved("last_sequence")), event.value ->> 1, event.value -> 2))
                          FROM json_each(journal.events) AS event, sessions WHERE sessions.id = journal.session)
                WHERE json_valid(events) AND session IN (SELECT id FROM sessions);
            UPDATE sessions SET version = max(version, \(mark)) + \(gapAfterCopy),
                last_sequence = max(last_sequence, \(mark)) + \(gapAfterCopy),
                next_serial = max(next_serial, \(mark)) + \(gapAfterCopy);
            UPDATE clock SET copied = 0;
            """
    }

    /// What makes a file a copy: set in the copy alone, once it is whole.
    static let markCopy = "UPDATE clock SET copied = 1"

    /// Brings a file of an older schema up to `version`, in the caller's transaction.
    static func migrations(from old: Int) -> String? {
        // Version 5 had no mark for a copy.
        if old == 5 {
            return "ALTER TABLE clock ADD COLUMN copied INTEGER NOT NULL DEFAULT 0;\nPRAGMA user_version = \(version);"
        }
        guard let toVersion3 = migrationToVersion3(from: old) else { return nil }
        // Versions 3 and 4 kept no clock of the store's: their sessions count as used at the upgrade.
        return """
            \(toVersion3)
            \(uses)
            \(clock)
            INSERT INTO uses (session, at) SELECT id, 0 FROM sessions;
            INSERT INTO clock (id, seconds, closed) VALUES (1, 0, 0);
            PRAGMA user_version = \(version);
            """
    }

    private static func migrationToVersion3(from old: Int) -> String? {
        switch old {
        case 1:
            // Version 1 kept transactions and events in two tables. Each kept event becomes a row
            // with nothing to replay (version 0, below every snapshot), and each transaction a row
            // after them with no events of its own; loading puts events back in order. An event
            // whose data is not JSON could not be sent again: it is left behind. The index lives
            // only as long as the copy needs it.
            """
            \(journal)
            CREATE INDEX journal_by_session ON journal (session, ordinal);
            INSERT INTO journal (session, version, last_sequence, next_serial, patch, extras, events, event_bytes, bytes_through)
                SELECT session, 0, sequence, 0, x'', NULL,
                       json_array(json_array(sequence, kind, json(CAST(data AS TEXT)))), length(data),
                       sum(length(data)) OVER (PARTITION BY session ORDER BY sequence)
                FROM events WHERE json_valid(CAST(data AS TEXT)) ORDER BY session, sequence;
            INSERT INTO journal (session, version, last_sequence, next_serial, patch, extras, events, event_bytes, bytes_through)
                SELECT session, version, last_sequence, next_serial, patch, extras, '[]', 0,
                       coalesce((SELECT max(bytes_through) FROM journal AS kept WHERE kept.session = transactions.session), 0)
                FROM transactions ORDER BY ordinal;
            DROP TABLE transactions;
            DROP TABLE events;
            DROP INDEX journal_by_session;
            """
        case 2:
            // Version 2 indexed the journal by session.
            "DROP INDEX journal_by_session;"
        case 3:
            ""
        case 4:
            // Version 4 recorded use by the wall clock, and only for a day: recorded anew.
            "DROP TABLE uses;"
        default:
            nil
        }
    }
}
