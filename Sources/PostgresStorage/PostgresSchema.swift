import SessionStorage

/// The store's tables in PostgreSQL, and the migration every node runs at start.
///
/// The same records as the SQLite store: a session's row (what never changes, plus its last
/// snapshot), the transactions since that snapshot (JSON Patches), and the events kept for
/// `Last-Event-ID`. A session's row also holds the epoch of the node that owns it
/// (`SharedSessionStorage`); version 1's rows get the epoch of a new session. Names start
/// with `navd_` so the tables can share a database with others'. Session ids sort bytewise
/// (`COLLATE "C"`), so loading by pages does not depend on the database's locale.
enum PostgresSchema {
    /// Bumped by every change to the tables below; a newer database is refused.
    /// 2: sessions carry their owner's fencing epoch.
    /// 3: and when a node last used them (the database's clock, in seconds since 1970), so
    /// sessions no node holds can expire; older rows count as used at the migration.
    /// 4: the ids of sessions a sweep or their holder expired, kept for a day (`navd_expired`).
    /// 5: each connection's count of commits (`navd_commit_lanes`, see `CommitLane`), which
    /// tells whether a commit whose reply was lost happened; kept a day after last use.
    static let version = 5

    /// The channel on which a claim (or a deletion) announces `"<id> <epoch>"` to every node.
    static let claimsChannel = "navd_claims"

    /// Serialises migrations across nodes starting at once: `CREATE TABLE IF NOT EXISTS` alone
    /// races on the catalog. The bytes "navd" as a number; held until the migration commits.
    static let migrationLock = 0x6E61_7664

    /// The database's clock, which every node shares, as `last_active` counts it.
    static let now = "extract(epoch from now())::double precision"

    /// How long a sweep's expiry is remembered. A holder that hears of a session's end late
    /// (its listening connection was down, or its write finds the row gone) tells its clients
    /// `expired` rather than `deleted` within that time; after it, `deleted`. A day covers any
    /// outage a node comes back from still holding its sessions, and keeps the table as small
    /// as a day of expiries.
    static let expiryMemory: Double = 86_400

    /// How long a connection's commit lane is kept unused: long past any commit it could be
    /// asked about, which is asked within seconds.
    static let laneMemory = "1 day"

    /// Idempotent: run in one transaction, under the lock, by every node at every start.
    static let create = """
        CREATE TABLE IF NOT EXISTS navd_schema (
            id integer PRIMARY KEY CHECK (id = 1),
            version integer NOT NULL
        );
        CREATE TABLE IF NOT EXISTS navd_sessions (
            id text COLLATE "C" PRIMARY KEY,
            token_hash bytea NOT NULL,
            feature text NOT NULL,
            created double precision NOT NULL,
            version bigint NOT NULL,
            last_sequence bigint NOT NULL,
            next_serial bigint NOT NULL,
            state bytea NOT NULL,
            tree bytea NOT NULL,
            extras bytea NOT NULL
        );
        CREATE TABLE IF NOT EXISTS navd_transactions (
            ordinal bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session text COLLATE "C" NOT NULL,
            version bigint NOT NULL,
            last_sequence bigint NOT NULL,
            next_serial bigint NOT NULL,
            patch bytea NOT NULL,
            extras bytea
        );
        CREATE INDEX IF NOT EXISTS navd_transactions_by_session ON navd_transactions (session, ordinal);
        CREATE TABLE IF NOT EXISTS navd_events (
            session text COLLATE "C" NOT NULL,
            sequence bigint NOT NULL,
            kind text NOT NULL,
            data bytea NOT NULL,
            PRIMARY KEY (session, sequence)
        );
        CREATE TABLE IF NOT EXISTS navd_expired (
            id text COLLATE "C" PRIMARY KEY,
            at double precision NOT NULL
        );
        CREATE INDEX IF NOT EXISTS navd_expired_by_at ON navd_expired (at);
        CREATE TABLE IF NOT EXISTS navd_probes (
            id integer PRIMARY KEY CHECK (id = 1),
            written timestamptz NOT NULL
        );
        CREATE TABLE IF NOT EXISTS navd_commit_lanes (
            lane text COLLATE "C" PRIMARY KEY,
            commits bigint NOT NULL,
            used timestamptz NOT NULL
        );
        ALTER TABLE navd_sessions ADD COLUMN IF NOT EXISTS epoch bigint NOT NULL DEFAULT \(SessionEpoch.created);
        ALTER TABLE navd_sessions ADD COLUMN IF NOT EXISTS last_active double precision NOT NULL DEFAULT \(now);
        CREATE INDEX IF NOT EXISTS navd_sessions_by_last_active ON navd_sessions (last_active);
        INSERT INTO navd_schema (id, version) VALUES (1, \(version)) ON CONFLICT (id) DO NOTHING;
        UPDATE navd_schema SET version = \(version) WHERE version < \(version);
        """
}
