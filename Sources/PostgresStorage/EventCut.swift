/// Which kept events a start reads back, so that it holds no more than the sessions' memory
/// budget: the store keeps an event buffer's worth for every session, far more than memory
/// may have room for, and reading it all first would run out before the budget trims it.
///
/// Every state comes back, and every event a session replays (past its snapshot): they were
/// acknowledged. The other events fill what room is left, newest first and evenly: each
/// session's newest, then each session's second newest, and so on, sessions in id order within
/// a round. PostgreSQL keeps no order across sessions' events, so "newest" is per session.
///
/// An event's round is its distance below its session's snapshot (`last_sequence - sequence`),
/// since a session's kept events are consecutive, so each session's share is a threshold on its
/// sequence: what is read stays one unbroken run up to its newest, and the pages find it through
/// the primary key.
struct EventCut: Sendable {
    /// Every event of the rounds below `rounds` is read, and the one of round `rounds` in
    /// sessions whose id is at most `lastSession`.
    let rounds: Int
    let lastSession: String

    /// Reads every event: memory has room for them all.
    static let everything = EventCut(rounds: .max / 2, lastSession: "")

    /// The events a page reads of session `s`, with the cut as `$3` and `$4`: one range of the
    /// primary key per session. (`OFFSET 0` keeps the planner from flattening it into a join
    /// that reads every event of the page's sessions and filters them afterwards.)
    static let keptEvents = """
        SELECT sequence, kind, data FROM navd_events
        WHERE session = s.id AND sequence >= s.last_sequence - $3 + CASE WHEN s.id <= $4 THEN 0 ELSE 1 END OFFSET 0
        """

    /// The cut for `memory`, where each session counts as its stored state and `perSession`
    /// (what the sessions' budget charges it at the least). Two scans of the events, each
    /// reading only their sizes; allowed as long as a migration, since a start waits for them.
    init(in connection: PostgresConnection, within memory: Int, perSession: Int) throws(PostgresConnection.Failure) {
        guard memory < .max else {
            self = .everything
            return
        }
        try connection.execute("SET LOCAL statement_timeout TO '120s'")
        let answerTimeout = connection.answerTimeout
        connection.answerTimeout = max(answerTimeout, .seconds(125))
        defer { connection.answerTimeout = answerTimeout }
        let states = try connection.integer(
            "SELECT (coalesce(sum(octet_length(state)), 0) + count(*) * $1)::bigint FROM navd_sessions", [.integer(perSession)])
        // Bytes by round, the events a session replays as round -1.
        var rounds: [(round: Int, bytes: Int)] = []
        try connection.run("""
            SELECT greatest(s.last_sequence - e.sequence, -1) AS below, sum(octet_length(e.data))::bigint
            FROM navd_events e JOIN navd_sessions s ON s.id = e.session GROUP BY below ORDER BY below
            """) { row in rounds.append((row.integer(0), row.integer(1))) }
        var room = max(0, memory - states)
        for (round, bytes) in rounds {
            guard round >= 0 else {
                room = max(0, room - bytes)
                continue
            }
            guard bytes > room else {
                room -= bytes
                continue
            }
            // The round that does not fit whole: sessions in id order, as far as the room goes.
            var last = ""
            try connection.run("""
                SELECT session FROM (
                    SELECT e.session, sum(octet_length(e.data)) OVER (ORDER BY e.session ROWS UNBOUNDED PRECEDING) AS filled
                    FROM navd_events e JOIN navd_sessions s ON s.id = e.session WHERE e.sequence = s.last_sequence - $1) running
                WHERE filled <= $2 ORDER BY session DESC LIMIT 1
                """, [.integer(round), .integer(room)]) { row in last = row.text(0) }
            self.init(rounds: round, lastSession: last)
            return
        }
        self = .everything
    }

    private init(rounds: Int, lastSession: String) {
        self.rounds = rounds
        self.lastSession = lastSession
    }
}
