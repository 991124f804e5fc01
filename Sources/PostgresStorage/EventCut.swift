/// Which kept events a start reads back, so that it holds no more than the sessions' memory
/// budget: the store keeps an event buffer's worth for every session, far more than memory
/// may have room for, and reading it all first would run out before the budget trims it.
///
/// Every state comes back, and every event a session replays (past its snapshot): they were
/// acknowledged. The other events fill what room is left, newest first and evenly: each
/// session's newest, then each session's second newest, and so on, sessions in id order within
/// a round. PostgreSQL keeps no order across sessions' events, so "newest" is per session.
struct EventCut: Sendable {
    /// An event that is not replayed is read when its depth (1 for its session's newest such
    /// event) is below `depth`, or equal to it in a session whose id is at most `lastSession`.
    let depth: Int
    let lastSession: String

    /// Reads every event: memory has room for them all.
    static let everything = EventCut(depth: .max, lastSession: "")

    /// Each event with whether its session replays it and its depth among the session's events
    /// that are not replayed. Followed by a `WHERE` on `e.session` or by nothing.
    static let ranked = """
        SELECT e.session, e.sequence, e.kind, e.data, e.sequence > s.last_sequence AS replayed,
               row_number() OVER (PARTITION BY e.session, e.sequence > s.last_sequence ORDER BY e.sequence DESC) AS depth
        FROM navd_events e JOIN navd_sessions s ON s.id = e.session
        """

    /// The cut for `memory`, where each session counts as its stored state and `perSession`
    /// (what the sessions' budget charges it at the least).
    init(in connection: PostgresConnection, within memory: Int, perSession: Int) throws(PostgresConnection.Failure) {
        guard memory < .max else {
            self = .everything
            return
        }
        var states = 0, replayed = 0, others = 0
        try connection.run("""
            SELECT (SELECT coalesce(sum(octet_length(state)), 0) + count(*) * $1 FROM navd_sessions)::bigint,
                   coalesce(sum(octet_length(e.data)) FILTER (WHERE e.sequence > s.last_sequence), 0)::bigint,
                   coalesce(sum(octet_length(e.data)) FILTER (WHERE e.sequence <= s.last_sequence), 0)::bigint
            FROM navd_events e JOIN navd_sessions s ON s.id = e.session
            """, [.integer(perSession)]) { row in
            states = row.integer(0)
            replayed = row.integer(1)
            others = row.integer(2)
        }
        let room = max(0, max(0, memory - states) - replayed)
        guard others > room else {
            self = .everything
            return
        }
        // The last event that fits, in the order the room is filled; none when not even one does.
        var last = EventCut(depth: 0, lastSession: "")
        try connection.run("""
            SELECT depth, session FROM (
                SELECT depth, session, sum(octet_length(data)) OVER (ORDER BY depth, session ROWS UNBOUNDED PRECEDING) AS filled
                FROM (\(Self.ranked)) ranked WHERE NOT replayed) running
            WHERE filled <= $1 ORDER BY depth DESC, session DESC LIMIT 1
            """, [.integer(room)]) { row in
            last = EventCut(depth: row.integer(0), lastSession: row.text(1))
        }
        self = last
    }

    private init(depth: Int, lastSession: String) {
        self.depth = depth
        self.lastSession = lastSession
    }
}
