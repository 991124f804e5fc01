/// A connection's row in `navd_commit_lanes`, which tells whether a transaction whose `COMMIT`
/// was cut off committed.
///
/// Every tracked transaction raises its lane's count as its first statement, and so holds the
/// row's lock until it ends. No other connection writes the row: once the connection is lost,
/// the count reads, from anywhere, as the last transaction that committed on it. Transaction
/// ids cannot say as much: a server that crashed hands them out again, and a promoted standby
/// has its own. A lane is new with every connection, so a lost one stays as it was left.
struct CommitLane {
    /// 128 random bits, in hex: safe to write into SQL as it is.
    let id: String
    /// When the row was last made sure of, in a commit of its own: a transaction can only wait
    /// for a row that others can see, so the row must exist before the first transaction locks
    /// it, and again after a sweep removed it (`PostgresSchema.laneMemory`).
    private var registered: ContinuousClock.Instant?

    static func make() -> CommitLane {
        var generator = SystemRandomNumberGenerator()
        let bits = [generator.next(), generator.next()] as [UInt64]
        return CommitLane(id: bits.map { String($0, radix: 16).leftPadded(to: 16) }.joined())
    }

    private init(id: String) {
        self.id = id
    }

    /// How often the row is made sure of: far within the day a sweep keeps an unused lane.
    static let registrationInterval: Duration = .seconds(3600)

    /// Whether the row must be made sure of before the next transaction.
    func needsRegistering(at now: ContinuousClock.Instant) -> Bool {
        registered.map { now - $0 >= Self.registrationInterval } ?? true
    }

    mutating func noteRegistered(at now: ContinuousClock.Instant) {
        registered = now
    }

    /// Makes the row, committed on its own (or marks it used).
    var register: String {
        """
        INSERT INTO navd_commit_lanes (lane, commits, used) VALUES ('\(id)', 0, now())
        ON CONFLICT (lane) DO UPDATE SET used = now()
        """
    }

    /// The first statement of a tracked transaction: raises the count and returns it.
    var raise: String {
        "UPDATE navd_commit_lanes SET commits = commits + 1, used = now() WHERE lane = '\(id)' RETURNING commits"
    }
}

extension String {
    fileprivate func leftPadded(to length: Int) -> String {
        String(repeating: "0", count: max(0, length - count)) + self
    }
}
