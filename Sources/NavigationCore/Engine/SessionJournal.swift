/// Where a durable session writes what it did, so that a restart brings it back exactly.
///
/// The engine knows nothing of the storage behind it: it hands over entries as each batch is
/// made, without waiting for the previous write (so a busy session's batches share commits
/// with everyone else's instead of queueing behind their own), and publishes a batch's events
/// (and answers the request that caused it) only once the journal says the batch is durable.
/// A failed write rolls the session back to what is durable.
public protocol SessionJournal: Sendable {
    /// Makes `entries` durable after every earlier write of the session, then calls
    /// `completion` once: `true` when all of them are, `false` when none is.
    ///
    /// Each batch is a patch on the one before, so once a write fails, every later write of
    /// the same `generation` must fail too, unwritten; the session rolls back and writes on
    /// with the next generation.
    func write(_ entries: [JournalEntry], generation: Int, completion: @escaping @Sendable (Bool) -> Void)

    /// Whether the store takes writes now, as far as anyone knows (false while its writes fail):
    /// work that can wait, such as settling what a rollback cancelled, waits for it rather than
    /// failing, and rolling the session back, again.
    var takesWrites: Bool { get }
}

extension SessionJournal {
    public var takesWrites: Bool { true }
}

/// A session whole at one moment: enough to rebuild it with the same tree, ids and counters.
public struct DurableSession: Sendable, Equatable {
    /// The session's version.
    public var version: Int
    /// The last event id issued.
    public var lastSequence: Int
    /// The next number for a presentation, element or stack id.
    public var nextSerial: Int
    /// The full state, children included.
    public var state: JSON
    /// The navigation tree clients hold.
    public var navigation: JSON

    /// A session whole, as a journal stores it.
    public init(version: Int, lastSequence: Int, nextSerial: Int, state: JSON, navigation: JSON) {
        self.version = version
        self.lastSequence = lastSequence
        self.nextSerial = nextSerial
        self.state = state
        self.navigation = navigation
    }

    /// The session after `entries`: the state patched, the tree moved on by the events (what
    /// every client does with them, rule 8), the counters of the last entry.
    public func applying(_ entries: [JournalEntry]) throws(RecoveryError) -> DurableSession {
        var session = self
        var replica: NavigationReplica
        do { replica = try NavigationReplica(navigation: navigation) } catch { throw RecoveryError(description: error.description) }
        for entry in entries {
            if let snapshot = entry.snapshot {
                session = snapshot
                do { replica = try NavigationReplica(navigation: snapshot.navigation) } catch { throw RecoveryError(description: error.description) }
                continue
            }
            try session.check(follows: entry)
            do {
                session.state = try JSONPatch.apply(entry.statePatch, to: session.state)
            } catch {
                throw RecoveryError(description: "state patch of version \(entry.version): \(error.description)")
            }
            for event in entry.events {
                do { try replica.apply(event: event.kind.rawValue, data: event.data) } catch {
                    throw RecoveryError(description: "event \(event.sequence): \(error.description)")
                }
            }
            session.version = entry.version
            session.lastSequence = entry.lastSequence
            session.nextSerial = entry.nextSerial
        }
        session.navigation = replica.navigation
        return session
    }

    /// A journal is one unbroken run of batches: each is the next version, and its events carry
    /// the next ids, one each, in order. A gap or a repeat is a row navd did not write (lost or
    /// edited): replayed, it would issue an id twice, or resume a client past what it missed.
    /// Wrapping arithmetic: the counters may be corrupt too, and are range-checked afterwards.
    private func check(follows entry: JournalEntry) throws(RecoveryError) {
        guard entry.version == version &+ 1 else {
            throw RecoveryError(description: "version \(entry.version) follows version \(version)")
        }
        let expected = lastSequence &+ 1
        guard !entry.events.isEmpty, entry.lastSequence == lastSequence &+ entry.events.count,
              entry.events.enumerated().allSatisfy({ $0.element.sequence == expected &+ $0.offset }) else {
            throw RecoveryError(description: "the events of version \(entry.version) are not the ids after \(lastSequence), in order")
        }
        guard entry.nextSerial >= nextSerial else {
            throw RecoveryError(description: "version \(entry.version) lowers the next id from \(nextSerial) to \(entry.nextSerial)")
        }
    }
}

/// One batch of a session: its events, how the state changed, and now and then the session
/// whole, after which earlier entries are no longer needed.
public struct JournalEntry: Sendable {
    /// The session's version after this batch.
    public let version: Int
    /// The last event id after this batch.
    public let lastSequence: Int
    /// The next id serial after this batch.
    public let nextSerial: Int
    /// The batch's events, in order.
    public let events: [NavigationEvent]
    /// JSON Patch from the state before this batch to the state after it.
    public let statePatch: JSON
    /// The session after this batch, whole; set every so often.
    public let snapshot: DurableSession?

    /// A batch as the session hands it to its journal.
    public init(version: Int, lastSequence: Int, nextSerial: Int, events: [NavigationEvent], statePatch: JSON, snapshot: DurableSession?) {
        self.version = version
        self.lastSequence = lastSequence
        self.nextSerial = nextSerial
        self.events = events
        self.statePatch = statePatch
        self.snapshot = snapshot
    }
}

/// A stored session that cannot be brought back as it was.
public struct RecoveryError: Error, Sendable, CustomStringConvertible {
    public let description: String
    /// A recovery failure, described for the log.
    public init(description: String) { self.description = description }
}
