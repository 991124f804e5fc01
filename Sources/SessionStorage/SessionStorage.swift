/// Where sessions live between processes: the seam between the server and a storage engine
/// (SQLite embedded, PostgreSQL for several nodes, or nothing at all for `--store memory`).
///
/// The server never asks a store to rewrite a session whole on every change. A session is kept
/// as a snapshot plus the transactions since: each transaction carries its events (what clients
/// were sent, and what a reconnecting client will be sent again) and a patch of the state. Every
/// so often the server writes a fresh snapshot, and the store drops what came before it.
public protocol SessionStorage: Sendable {
    /// Hands every live session to `each`, one at a time, at start; returns the ids of records
    /// that failed to decode (reported, not fatal). One at a time, so what a record needs only
    /// while it is restored is freed before the next: a restart does not cost more memory than
    /// the sessions themselves. `memory` is what the sessions may hold together, each counted
    /// as its stored state and `perSession` more: their states come back whatever it holds
    /// (they were acknowledged), their kept events only as far as it has room after the states,
    /// newest first; a store need not read the rest, and one that keeps more on disk than memory
    /// has room for must not load it (a restart would run out of memory before the sessions'
    /// budget trims them).
    func load(within memory: Int, perSession: Int, _ each: (StoredSession) -> Void) throws(StorageError) -> [String]

    /// Makes `writes` durable, in order, in one atomic commit with whatever else is pending
    /// (group commit), then calls `completion` once, on some thread of the store's. A 2xx answer
    /// is sent only after a successful completion.
    ///
    /// `admissible` is asked on the store's writer, in commit order, right before the writes
    /// would be applied; `false` fails them unwritten. Completions run on that same writer
    /// before any later commit's `admissible`, so a write can depend on an earlier one.
    func commit(_ writes: [StoreWrite], admissible: @escaping @Sendable () -> Bool,
                completion: @escaping @Sendable (Result<Void, StorageError>) -> Void)

    /// Waits for every commit already handed over, then releases the engine.
    func close()

    /// Counters for `/metrics`; cheap enough to call on every scrape.
    func statistics() -> StorageStatistics

    /// How long the commit running now has taken so far, nil when none runs
    /// (`GroupCommit.runningFor`); cheap enough to ask on every readiness check.
    func commitRunningFor() -> Duration?
}

/// A store that can copy itself while it serves: what an operator keeps, and restores by
/// starting navd on it. A copy of the live files would not do: taken while a commit writes, it
/// can hold half of one.
public protocol BackupStorage: SessionStorage {
    /// Writes a copy of the store, whole as of one moment after the call, to a new file in
    /// `directory` (made if absent), a piece at a time between commits, so they are not held
    /// up for the whole copy; calls `completion` once, on some thread of the store's. One copy
    /// at a time: a second asked for meanwhile fails.
    func backUp(into directory: String, completion: @escaping @Sendable (Result<StoreBackup, StorageError>) -> Void)

    /// When the newest whole copy in `directory` was written, in seconds since 1970; nil when
    /// there is none.
    func newestBackup(in directory: String) -> Int?
}

/// A copy `BackupStorage.backUp` wrote.
public struct StoreBackup: Sendable, Equatable {
    /// The file, complete: it is moved into place only once written and synced.
    public var path: String
    /// Its size.
    public var bytes: Int

    public init(path: String, bytes: Int) {
        self.path = path
        self.bytes = bytes
    }
}

/// A store several nodes share, each session owned by one node at a time.
///
/// Ownership is a fencing epoch in the store, per session: a node takes a session over by
/// raising its epoch (compare-and-set, in the same transaction as it reads the session), and
/// every write of the session carries the epoch it was loaded with (`StoreWrite.fence`), checked
/// in the transaction that would write it. A node that was taken over can therefore never write
/// the session again, whatever it still holds in memory; it hears about the takeover at once
/// (`onTakeover`), or at the latest when its next write fails with `.fenced`.
///
/// Nodes load sessions on demand (`claim`), never all at start: which node serves which session
/// is the router's choice (nginx hashing the session id), not the store's.
public protocol SharedSessionStorage: SessionStorage {
    /// Loads session `id` and takes it over, if it exists, `authorize` accepts its token hash
    /// and `restore` brings back what was read with the epoch the claim takes. Both are asked
    /// before anything changes: a caller without the token, or a node that cannot bring the
    /// session back (a feature it lacks, a state over its bounds), moves nothing, and the node
    /// that holds it keeps it. Runs on a thread of the store's, apart from commits; calls
    /// `completion` once.
    func claim(_ id: String, authorize: @escaping @Sendable (_ tokenHash: [UInt8]) -> Bool,
               restore: @escaping @Sendable (_ stored: StoredSession, _ epoch: Int) -> Bool,
               completion: @escaping @Sendable (Result<SessionClaim, StorageError>) -> Void)

    /// Deletes session `id`, if it exists, `authorize` accepts its token hash and, with
    /// `ifVersion`, its durable version is that one, without taking it over first: the node
    /// that holds it hears the deletion (`SessionEpoch.deleted`) and ends it there, `end` on its
    /// streams, as its own `DELETE` would have. Runs beside claims; calls `completion` once.
    func delete(_ id: String, ifVersion: Int?, authorize: @escaping @Sendable (_ tokenHash: [UInt8]) -> Bool,
                completion: @escaping @Sendable (Result<SessionDeletion, StorageError>) -> Void)

    /// Called, on a thread of the store's, whenever any node (this one included) took session
    /// `id` over with `epoch`, or deleted it (`SessionEpoch.deleted`, or `SessionEpoch.expired`
    /// from a sweep): holders of an older epoch let it go.
    ///
    /// Announcements made while the store could not hear them (its connection lost) are not
    /// missed, only late: once it hears again, it calls `body` with the current epoch of every
    /// session `held` lists (sessions this node holds and has stored), and with
    /// `SessionEpoch.deleted` for those that are gone.
    func onTakeover(held: @escaping @Sendable () -> [String], _ body: @escaping @Sendable (_ id: String, _ epoch: Int) -> Void)

    /// The epoch session `id` has in the store now, `SessionEpoch.deleted` when it is gone: what
    /// an announcement would have said, for a node that has reason to think it missed one. Runs
    /// beside claims; calls `completion` once.
    func currentEpoch(of id: String, completion: @escaping @Sendable (Result<Int, StorageError>) -> Void)

    /// Expiry across nodes, once per round on every node: records the sessions `inUse`
    /// (held here and used since the last record) as used now, then, with `idle`, deletes every
    /// session no node has used for that long, announcing each deletion like `DELETE` does. A
    /// session that no node holds (its node gone, or never asked for since a restart) expires
    /// this way. Runs apart from commits and claims; calls `completion` once, with the ids it
    /// deleted, or with the failure (then nothing of `inUse` counts as recorded).
    func sweep(inUse: [String], idle: Duration?, completion: @escaping @Sendable (Result<[String], StorageError>) -> Void)
}

/// Epochs every shared store agrees on.
public enum SessionEpoch {
    /// A new session's: the node that created it owns it until another claims it.
    public static let created = 1
    /// What a deletion announces: every holder ends the session.
    public static let deleted = Int.max
    /// What a sweep's deletion of an idle session announces: every holder ends it as expired.
    public static let expired = Int.max - 1

    /// Whether an announced `epoch` says the session is gone for good, rather than taken over.
    public static func isGone(_ epoch: Int) -> Bool {
        epoch >= expired
    }
}

/// What `delete` found.
public enum SessionDeletion: Sendable, Equatable {
    /// Deleted, and announced to every node.
    case deleted
    /// No such session (never created, or deleted already).
    case notFound
    /// The session exists, but the token did not match: nothing changed.
    case refused
    /// The session exists, the token matched, but its version is `current`, not the one asked
    /// for: nothing changed.
    case versionMismatch(current: Int)
}

/// What `claim` found.
public enum SessionClaim: Sendable {
    /// The session, now this node's with `epoch`.
    case claimed(StoredSession, epoch: Int)
    /// No such session (never created, or deleted).
    case notFound
    /// The session exists, but the token did not match: nothing changed.
    case refused
    /// The session's record does not decode, or this node could not bring it back: nothing
    /// changed.
    case unreadable
}

extension SessionStorage {
    /// A store that commits in no time of its own (test doubles).
    public func commitRunningFor() -> Duration? { nil }

    /// Writes that depend on no other write.
    public func commit(_ writes: [StoreWrite], completion: @escaping @Sendable (Result<Void, StorageError>) -> Void) {
        commit(writes, admissible: { true }, completion: completion)
    }

    /// Every live session with every kept event (tests, tools).
    public func load(_ each: (StoredSession) -> Void) throws(StorageError) -> [String] {
        try load(within: .max, perSession: 0, each)
    }

    /// Every live session at once (tests, tools).
    public func loadAll() throws(StorageError) -> LoadedSessions {
        var sessions: [StoredSession] = []
        let failed = try load { sessions.append($0) }
        return LoadedSessions(sessions: sessions, failed: failed)
    }
}

/// What `loadAll` found.
public struct LoadedSessions: Sendable {
    public var sessions: [StoredSession]
    /// Ids of session records that could not be read; they are skipped.
    public var failed: [String]

    public init(sessions: [StoredSession], failed: [String]) {
        self.sessions = sessions
        self.failed = failed
    }
}

/// One change to the store.
public enum StoreWrite: Sendable {
    /// A new session, with its first snapshot.
    case create(SessionRecord, SessionSnapshot)
    /// What one transaction of the session changed.
    case transaction(id: String, SessionTransaction)
    /// A fresh snapshot; transactions up to `snapshot.lastSequence` may be dropped.
    case snapshot(id: String, SessionSnapshot)
    /// The session ended: everything about it leaves the store. `expired`: it ended for being
    /// idle, which a store several nodes share remembers, so that a node still holding it ends it
    /// as expired too, as after a sweep.
    case delete(id: String, expired: Bool = false)
    /// For how many seconds each session (by id) has had no request and no open stream: written
    /// once, as the server stops, so the next start finds each as idle as it was, not fresh.
    /// The store counts idle time by a clock of its own that runs only while a process has it
    /// open, so the time the server was down is no one's idle time. A store several nodes
    /// share records use in `sweep` instead and is never sent one.
    case idle(seconds: [String: Double])
    /// A small write of no session's, to learn whether the store takes writes again after a
    /// failure (a full disk that has room again).
    case probe
    /// The first write of a request on a shared store: the rest of the request is written only
    /// while the session's epoch is still `epoch` (no other node took it over since), in the
    /// same transaction; otherwise none of it is, and the request fails with `.fenced`.
    /// A store of one node hands out no epochs and is never sent one.
    case fence(id: String, epoch: Int)
}

/// What never changes about a session.
public struct SessionRecord: Sendable, Equatable {
    public var id: String
    /// SHA-256 of the token: a copy of the store opens no session.
    public var tokenHash: [UInt8]
    public var feature: String
    /// Seconds since 1970 when it was created.
    public var created: Double

    public init(id: String, tokenHash: [UInt8], feature: String, created: Double) {
        self.id = id
        self.tokenHash = tokenHash
        self.feature = feature
        self.created = created
    }
}

/// A session whole at one moment: its state, the tree clients hold (with every id), and the
/// counters that must go on without reuse.
public struct SessionSnapshot: Sendable, Equatable {
    public var version: Int
    /// The last event id issued.
    public var lastSequence: Int
    /// The next number for a presentation, element or stack id.
    public var nextSerial: Int
    /// The full state, as `GET /sessions/{id}` shows it (encoded JSON).
    public var state: [UInt8]
    /// The navigation tree, as `GET /sessions/{id}/navigation` shows it (encoded JSON).
    public var tree: [UInt8]
    /// Feature-specific facts that are not state but must survive (a timer's deadline), as JSON.
    public var extras: [UInt8]

    public init(version: Int, lastSequence: Int, nextSerial: Int, state: [UInt8], tree: [UInt8], extras: [UInt8] = Array("{}".utf8)) {
        self.version = version
        self.lastSequence = lastSequence
        self.nextSerial = nextSerial
        self.state = state
        self.tree = tree
        self.extras = extras
    }
}

/// One transaction: the events it emitted and how it changed the state.
public struct SessionTransaction: Sendable, Equatable {
    public var version: Int
    public var lastSequence: Int
    public var nextSerial: Int
    /// A JSON Patch (RFC 6902) from the state before to the state after (encoded JSON).
    public var statePatch: [UInt8]
    public var events: [StoredEvent]
    /// Replaces the snapshot's extras when present.
    public var extras: [UInt8]?

    public init(version: Int, lastSequence: Int, nextSerial: Int, statePatch: [UInt8], events: [StoredEvent], extras: [UInt8]? = nil) {
        self.version = version
        self.lastSequence = lastSequence
        self.nextSerial = nextSerial
        self.statePatch = statePatch
        self.events = events
        self.extras = extras
    }
}

/// An event as clients received it.
public struct StoredEvent: Sendable, Equatable {
    public var sequence: Int
    public var kind: String
    /// The event's `data:` JSON, exactly as sent.
    public var data: [UInt8]

    public init(sequence: Int, kind: String, data: [UInt8]) {
        self.sequence = sequence
        self.kind = kind
        self.data = data
    }
}

/// A session as the store holds it: its last snapshot, the transactions since, and the events
/// kept for resuming (at most the event buffer's worth, oldest first).
public struct StoredSession: Sendable, Equatable {
    public var record: SessionRecord
    public var snapshot: SessionSnapshot
    /// In commit order, all after `snapshot.lastSequence`.
    public var transactions: [SessionTransaction]
    /// Events kept for `Last-Event-ID`, in order; they may start before the snapshot.
    public var events: [StoredEvent]
    /// For how many seconds it had had no request and no open stream when the last process
    /// stopped (`StoreWrite.idle`); nil when the store does not know (that process crashed, or
    /// an older one wrote the store).
    public var idleSeconds: Double?

    public init(record: SessionRecord, snapshot: SessionSnapshot, transactions: [SessionTransaction], events: [StoredEvent],
                idleSeconds: Double? = nil) {
        self.record = record
        self.snapshot = snapshot
        self.transactions = transactions
        self.events = events
        self.idleSeconds = idleSeconds
    }
}

/// Why a store failed. A commit that fails leaves nothing of its batch behind, unless it
/// says `outcomeUnknown`.
public enum StorageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The data directory cannot be opened or is not navd's.
    case cannotOpen(String)
    /// The disk is full or an I/O error happened; the batch was rolled back.
    case unavailable(String)
    /// The store did not answer: a database that cannot be reached, or one that stopped
    /// answering until the store's deadline. Nothing was written; every other write would wait
    /// as long, so none is tried again at once.
    case unreachable(String)
    /// The store was lost in the middle of committing the batch and cannot say whether it did:
    /// the batch may be stored, whole, or not at all. A node holding its sessions must not take
    /// its own copies for the stored ones: it lets them go, to be read again from the store.
    case outcomeUnknown(String)
    /// Another node took the session over (its epoch moved on): nothing of the request was
    /// written, and this node must let the session go.
    case fenced(String)
    /// The session is gone from the shared store, deleted by another node: nothing of the
    /// request was written, and this node must end the session…
    case deleted(String)
    /// …or expired by a node's sweep.
    case expired(String)
    /// Not sent to the store: it depended on an earlier write that failed, or on a session copy
    /// that may no longer write (`admissible` said no). Nothing was written, and it says
    /// nothing of the store's health.
    case notAttempted(String)

    /// Whether the write was refused for its session alone (taken over or gone), not for a
    /// fault of the store.
    public var isFencedOff: Bool {
        switch self {
        case .fenced, .deleted, .expired: true
        case .cannotOpen, .unavailable, .unreachable, .outcomeUnknown, .notAttempted: false
        }
    }

    /// Whether it shows the store failing (a full disk, a lost database), as opposed to a
    /// refusal of one session's write.
    public var isStoreFault: Bool {
        switch self {
        case .cannotOpen, .unavailable, .unreachable, .outcomeUnknown: true
        case .fenced, .deleted, .expired, .notAttempted: false
        }
    }

    public var description: String {
        switch self {
        case .cannotOpen(let reason): "cannot open the session store: \(reason)"
        case .unavailable(let reason): "the session store is unavailable: \(reason)"
        case .unreachable(let reason): "the session store does not answer: \(reason)"
        case .outcomeUnknown(let reason): "the session store may or may not have stored the change: \(reason)"
        case .fenced(let id): "another node owns session \(id) now"
        case .deleted(let id): "session \(id) was deleted"
        case .expired(let id): "session \(id) expired"
        case .notAttempted(let reason): "not sent to the session store: \(reason)"
        }
    }
}

/// How a store has been doing, for `/metrics`. Counters only grow.
public struct StorageStatistics: Sendable, Equatable {
    /// Commits that reached the disk.
    public var commits = 0
    /// Commits that failed and were rolled back.
    public var failedCommits = 0
    /// Commit requests (one per request or session batch) made durable; over `commits`, how well
    /// group commit shares a sync.
    public var writes = 0
    /// Upper bounds (seconds) of the commit latency histogram and the count at or under each.
    /// The same for every engine, so one dashboard reads any of them.
    public var latencyBounds: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]
    public var latencyCounts: [Int]
    public var latencySum = 0.0
    /// Upper bounds of the commit requests per commit histogram and the count at or under each.
    public var batchBounds = [1, 2, 4, 8, 16, 32, 64, 128, 256]
    public var batchCounts: [Int]
    /// Bytes the store takes on disk now.
    public var bytesOnDisk = 0

    public init() {
        latencyCounts = Array(repeating: 0, count: latencyBounds.count)
        batchCounts = Array(repeating: 0, count: batchBounds.count)
    }

    /// Counts one commit of `requests` requests that took `seconds`; a failed one only as failed.
    public mutating func record(commitSucceeded: Bool, requests: Int, seconds: Double) {
        guard commitSucceeded else {
            failedCommits += 1
            return
        }
        commits += 1
        writes += requests
        latencySum += seconds
        for (index, bound) in latencyBounds.enumerated() where seconds <= bound { latencyCounts[index] += 1 }
        for (index, bound) in batchBounds.enumerated() where requests <= bound { batchCounts[index] += 1 }
    }
}

extension StoredSession {
    /// A session as an engine reads it back: its transactions as stored (without events) and
    /// the events stored for it, in order. Each transaction gets the events after the previous
    /// transaction's last one, up to its own last: all of them, since replaying a transaction
    /// needs its events whatever the buffer keeps (a restart with a smaller `--event-buffer`,
    /// or more events since the snapshot than the buffer holds). `Last-Event-ID` gets what
    /// `retention` keeps.
    public init(record: SessionRecord, snapshot: SessionSnapshot, transactions: [SessionTransaction], events: [StoredEvent],
                idleSeconds: Double? = nil, retention: EventRetention) {
        var replay = transactions
        var next = events.firstIndex { $0.sequence > snapshot.lastSequence } ?? events.endIndex
        for index in replay.indices {
            let start = next
            while next < events.endIndex && events[next].sequence <= replay[index].lastSequence { next += 1 }
            replay[index].events = Array(events[start..<next])
        }
        self.init(record: record, snapshot: snapshot, transactions: replay, events: retention.keep(events), idleSeconds: idleSeconds)
    }
}

/// How many events per session a store keeps for `Last-Event-ID`: the event buffer's bounds,
/// by count and by bytes.
public struct EventRetention: Sendable {
    public var count: Int
    public var bytes: Int

    public init(count: Int, bytes: Int) {
        self.count = max(0, count)
        self.bytes = max(0, bytes)
    }

    /// The newest of `events` (oldest first) that the buffer would keep.
    public func keep(_ events: [StoredEvent]) -> [StoredEvent] {
        var start = max(0, events.count - count)
        var total = 0
        for index in stride(from: events.count - 1, through: start, by: -1) {
            total += events[index].data.count
            if total > bytes {
                start = index + 1
                break
            }
        }
        return Array(events[start...])
    }
}

/// Stored sessions read back a page at a time, by id: what one page needs is freed before the
/// next is read, so recovery never holds the whole store.
public struct SessionPage: Sendable {
    public static let size = 512

    public var sessions: [StoredSession] = []
    /// Ids of records that did not decode.
    public var failed: [String] = []
    /// The last id read; `nil` once there are no more.
    public var last: String?

    public init() {}

    /// Reads page after page (each after the previous page's last id) until one is empty,
    /// handing every session to `each`; returns the ids that failed to decode.
    public static func readAll(_ read: (_ after: String) throws(StorageError) -> SessionPage,
                               _ each: (StoredSession) -> Void) throws(StorageError) -> [String] {
        var failed: [String] = []
        var after = ""
        while true {
            let page = try read(after)
            failed += page.failed
            for session in page.sessions { each(session) }
            guard let last = page.last else { return failed }
            after = last
        }
    }
}
