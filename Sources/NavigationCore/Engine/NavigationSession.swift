import Synchronization

/// One user's navigation: a root feature, the tree it derives, and the events that got it there.
///
/// Each session is an actor, so its models are only ever touched on its own serial executor, and
/// different sessions run in parallel. Every request is a transaction: it first publishes what
/// effects changed meanwhile, then checks its target against the fresh tree, changes state and
/// reconciles, emitting one contiguous batch.
public actor NavigationSession {
    /// The root feature's name.
    public nonisolated let feature: String
    /// Where the session runs, every job and callback of it.
    public nonisolated let executor: any SessionExecutor
    /// The actor runs on `executor`, so a caller already there can use it in place.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
    /// Goes up by one with every transaction that emits events.
    public private(set) var version = 0
    private var lastSequence = 0 {
        didSet { lastSnapshot = nil }
    }
    private var reconciler: Reconciler {
        didSet { lastSnapshot = nil }
    }
    /// The snapshot last made, while nothing has changed since: the streams that open at one
    /// moment (a reconnect after a deploy, many subscribers of one session) share one walk and
    /// one encoding of the tree. The tree changes only with events, or with a new reconciler.
    private var lastSnapshot: NavigationEvent?
    private let tracker: ChangeTracker
    private var log: EventLog
    private var publish: (@Sendable ([NavigationEvent]) -> Void)?
    private var runningEffects: [Int: Task<Void, Never>] = [:]
    private var unfinishedEffects: Set<Int> = []
    /// Requests waiting for an effect to finish (`?wait=true`), by effect.
    private var effectWaiters: [Int: [Wakeup]] = [:]
    private var endEvent: NavigationEvent?
    private var nextEffectID = 0
    /// The bounds every request is checked against.
    public nonisolated let limits: SessionLimits
    /// What the session weighs against `limits.maxStateBytes`.
    var stateBytes: Int { reconciler.stateBytes }
    /// What the session is charged in `limits.memory` now; given back when it goes away.
    private(set) var charged = 0
    /// Features on screen, the root included.
    var featuresOnScreen: Int { reconciler.nodeCount }
    private var durability: Durability?
    /// Failed writes so far: an outcome made before one was undone by it.
    private var rollbacks = 0
    private var settlingIsScheduled = false
    static let settlingDelay = Duration.seconds(1)
    /// Let go (another node took it over): nothing more is started or settled here.
    private var isSuspended = false
    /// A deletion is on its way to the store (`close(ifMatch:)`).
    private var isClosing = false
    /// The largest version, event id or id number a restored record may hold: the largest
    /// integer a JSON number carries exactly, far from where counting on would overflow.
    static let counterLimit = 1 << 53

    /// Makes the root feature anew from a full state: how a rollback rebuilds the session.
    private let rebuild: @Sendable (JSON) throws(StateError) -> any AnyLiveFeature
    /// What settling a deep link's state continues (a timed alert's timer), held until the
    /// session is hosted (`startSettledWork`): an effect may write, and the store must have the
    /// session first.
    private var settledWork: [Effect] = []

    /// - Parameter deepLinked: the root was made from a client's state, which is settled before
    ///   anything shows it: a deep link starts no work, so what it says is under way is not.
    init(feature: String, root: sending any AnyLiveFeature, deepLinked: Bool = false, limits: SessionLimits, executor: any SessionExecutor,
         rebuild: @escaping @Sendable (JSON) throws(StateError) -> any AnyLiveFeature) throws(NavigationError) {
        self.feature = feature
        self.executor = executor
        self.limits = limits
        self.rebuild = rebuild
        if deepLinked { settledWork = Self.settleShown(by: root) }
        let tracker = ChangeTracker()
        self.tracker = tracker
        let reconciler = Reconciler(root: root, tracker: tracker)
        guard reconciler.stateBytes <= limits.maxStateBytes else {
            throw .tooLarge(StateError(JSONPath("state"),
                                       "the session's state would take \(reconciler.stateBytes) bytes, more than this server's limit of \(limits.maxStateBytes)"))
        }
        self.reconciler = reconciler
        self.log = EventLog(capacity: limits.eventBufferCount, byteLimit: limits.eventBufferBytes)
        charged = MemoryBudget.charge(features: reconciler.nodeCount, stateBytes: reconciler.stateBytes, eventBytes: 0)
        limits.memory?.charge(charged)
        watchEffects()
    }

    deinit {
        limits.memory?.charge(-charged)
    }

    /// A session brought back from its journal: its last snapshot with the entries since replayed
    /// onto it; the same tree, ids, counters and kept events.
    init(feature: String, restoring snapshot: DurableSession, replaying entries: [JournalEntry], events: [NavigationEvent],
         limits: SessionLimits, journal: any SessionJournal, executor: any SessionExecutor,
         rebuild: @escaping @Sendable (JSON) throws(StateError) -> any AnyLiveFeature) throws(RecoveryError) {
        let stored = try snapshot.applying(entries)
        // Counters a record could only have by corruption: one more change would overflow them.
        for (name, value) in [("version", stored.version), ("last event id", stored.lastSequence), ("next id", stored.nextSerial)]
        where !(0...Self.counterLimit).contains(value) {
            throw RecoveryError(description: "\(name) \(value) is out of range")
        }
        self.feature = feature
        self.executor = executor
        self.limits = limits
        self.rebuild = rebuild
        let tracker = ChangeTracker()
        self.tracker = tracker
        self.log = EventLog(capacity: limits.eventBufferCount, byteLimit: limits.eventBufferBytes)
        do {
            let root = try rebuild(stored.state)
            self.reconciler = try Reconciler(root: root, tracker: tracker, restoring: stored.navigation, nextSerial: stored.nextSerial)
        } catch let error as StateError {
            throw RecoveryError(description: "state: \(error.description)")
        } catch {
            throw RecoveryError(description: "\(error)")
        }
        version = stored.version
        lastSequence = stored.lastSequence
        // The events kept for `Last-Event-ID` are the newest, unbroken: from a gap, a resume would
        // replay around what is missing.
        if let last = events.last, last.sequence != stored.lastSequence
            || zip(events, events.dropFirst()).contains(where: { $1.sequence != $0.sequence &+ 1 }) {
            throw RecoveryError(description: "the events kept for resuming are not the ids up to \(stored.lastSequence), unbroken")
        }
        // Kept events serve resumes only: past the budget the oldest stay on disk, as they would
        // have gone from memory had the budget been spent while they came (a resume from before
        // them gets a snapshot). A restart must not bring back more than the budget lets run.
        for event in events { log.append(event) }
        // Charged whatever the budget holds: what was acknowledged comes back.
        let stateCharge = MemoryBudget.charge(features: reconciler.nodeCount, stateBytes: reconciler.stateBytes, eventBytes: 0)
        if let memory = limits.memory {
            let room = memory.charge(stateCharge, andUpTo: log.bytes)
            log.trim(toBytes: room)
            memory.charge(log.bytes - room)
        }
        charged = stateCharge + log.bytes
        durability = Durability(journal: journal, durable: stored)
        // What the journal holds since its snapshot still counts toward the next one: a session
        // that changes a little in each of many runs must get a snapshot all the same.
        for entry in entries {
            durability?.count(entry.events)
            durability?.count(patch: entry.statePatch)
        }
        watchEffects()
    }

    /// From now on every batch is written to `journal` and published only once it is durable.
    /// Returns the session as it stands, the journal's first snapshot.
    public func makeDurable(journal: any SessionJournal) -> DurableSession {
        flush()
        let current = currentSnapshot()
        durability = Durability(journal: journal, durable: current)
        return current
    }

    /// Called with the streams to close when a failed write rolled the session back: clients
    /// reconnect and resume from what is durable.
    public func onRollback(_ body: @escaping @Sendable () -> Void) {
        rolledBack = body
    }

    private var rolledBack: (@Sendable () -> Void)?

    /// Batches handed to the journal or waiting for it, not yet durable.
    var pendingWrites: Int { durability?.inFlight.count ?? 0 }

    /// The next number for an id, as a restored session must continue it.
    var serialCounter: Int { reconciler.serialCounter }

    private func currentSnapshot() -> DurableSession {
        DurableSession(version: version, lastSequence: lastSequence, nextSerial: reconciler.serialCounter,
                       state: encodeState() ?? .null, navigation: reconciler.root.json)
    }

    /// What a request changed.
    public struct Outcome: Sendable {
        /// The session's version after the request.
        public let version: Int
        /// The events the request caused, in order.
        public let events: [NavigationEvent]
        let effect: Int?
        let sequenceBefore: Int
        /// The last event id `version` covers: answering with that version promises that
        /// everything up to it is durable, even when this request itself changed nothing.
        let through: Int
        /// The session's rollbacks when it was made: one since means it was undone.
        var rollbacks = 0
        /// After a wait for its effects (`waitForEffects`): whether the events are not all it
        /// caused, because one was still running when the wait ran out, or because the event
        /// buffer no longer held those it had caused.
        public var effectsPending = false

        /// This request's outcome and the one of `later`, made right after it in the same turn
        /// (a deep link, then its settling), answered as one; itself when there is no `later`.
        public func followed(by later: Outcome?) -> Outcome {
            guard let later else { return self }
            return Outcome(version: later.version, events: events + later.events, effect: effect, sequenceBefore: sequenceBefore,
                           through: max(through, later.through), rollbacks: later.rollbacks)
        }
    }

    /// How a new subscriber starts: the events it missed, or a snapshot of the whole tree.
    public enum Start: Sendable {
        /// The events after the subscriber's last one, in order.
        case resume([NavigationEvent])
        /// The whole tree, as a `snapshot` event.
        case snapshot(NavigationEvent)
        /// The session has ended; here is its `end` event.
        case ended(NavigationEvent)
    }

    /// Receives every batch, in order, on the session's executor. Set once, by whoever hosts it.
    public func onEvents(_ body: @escaping @Sendable ([NavigationEvent]) -> Void) {
        publish = body
    }

    // MARK: - Reading

    /// The current tree, after publishing what effects changed meanwhile (rule 8).
    public func navigation() -> JSON {
        flush()
        return reconciler.root.json
    }

    /// The full state encoded twice at one moment: with what is kept between encodings, and
    /// afresh. Tests hold the first to the second.
    func stateEncodedBothWays() -> (kept: JSON?, fresh: JSON?) {
        flush()
        return (reconciler.encodeState(keeping: true), reconciler.root.feature.encodeState())
    }

    /// `version`, the full state (children included) and the navigation tree, read together.
    public func describe() -> (version: Int, state: JSON, navigation: JSON) {
        flush()
        return (version, encodeState() ?? .null, reconciler.root.json)
    }

    /// The id of the last event this session issued, durable or not.
    public var lastEventID: Int { lastSequence }

    /// Runs `body` on the session's executor with the events after `lastEventID`, or a snapshot
    /// when there is no id or it is too old or unknown. Nothing is published in between, so a
    /// subscriber registered in `body` misses nothing and gets nothing twice.
    ///
    /// With a journal, events not yet durable are not published yet, and neither a resume nor a
    /// snapshot shows them: a snapshot of batches a crash could still lose would carry an id the
    /// restarted session issues again for other events. `body` gets the last event id its start
    /// covers; the batches still being written reach the subscriber once they are durable.
    ///
    /// A resume whose missed events take more than `replayLimit` bytes gets a snapshot instead,
    /// as if they were no longer kept: queued for one stream, the whole event buffer (megabytes)
    /// would wait for a client that may read it for an hour, once per connection it opens.
    public func attach<Result: Sendable>(after lastEventID: Int?, replayLimit: Int = .max,
                                         _ body: @Sendable (Start, Int) -> Result) -> Result {
        if let endEvent { return body(.ended(endEvent), endEvent.sequence) }
        flush()
        let published = durability?.durableSequence ?? lastSequence
        if let lastEventID, let missed = log.events(after: lastEventID, lastIssued: published),
           missed.reduce(0, { $0 + $1.encodedData.count }) <= replayLimit {
            return body(.resume(missed), published)
        }
        if let durable = durableSnapshot() { return body(.snapshot(durable), durable.sequence) }
        return body(.snapshot(snapshot()), lastSequence)
    }

    /// The snapshot as of the last durable batch, while later ones are still being written; nil
    /// when everything is durable (then it is the session as it stands).
    private func durableSnapshot() -> NavigationEvent? {
        guard let durability, durability.durableSequence < lastSequence else { return nil }
        // The durable state is kept as the last stored snapshot and the entries since, exactly
        // what a restart would load; replaying them is what a restart would do.
        guard let durable = try? durability.snapshot.applying(durability.entriesSinceSnapshot) else { return nil }
        return NavigationEvent(sequence: durable.lastSequence, kind: .snapshot, data: .object(JSONObject([
            ("version", .int(durable.version)), ("navigation", durable.navigation),
        ])))
    }

    func snapshot() -> NavigationEvent {
        if let lastSnapshot { return lastSnapshot }
        let snapshot = NavigationEvent(sequence: lastSequence, kind: .snapshot, data: .object(JSONObject([
            ("version", .int(version)), ("navigation", reconciler.root.json),
        ])))
        lastSnapshot = snapshot
        return snapshot
    }

    /// The events that build the initial tree from an empty screen (rule 7).
    func initialEvents() -> [(NavigationEvent.Kind, JSON)] { reconciler.initialEvents }

    // MARK: - Requests

    /// A user action on the feature instance `target`, with its arguments checked against the declaration.
    public func perform(target: String, action: String, arguments: JSON?, ifMatch: Int? = nil) throws(NavigationError) -> Outcome {
        let carried = try arguments.map { arguments throws(NavigationError) in try measure(arguments, at: JSONPath("args")) } ?? 0
        return try transaction(ifMatch: ifMatch, carrying: carried) { reconciler throws(NavigationError) in
            try feature(target, in: reconciler).perform(action, arguments: arguments)
        }
    }

    /// A binding write: sets a bindable field of `target` as the user typed it.
    public func bind(target: String, field: String, value: JSON, ifMatch: Int? = nil) throws(NavigationError) -> Outcome {
        let carried = try measure(value, at: JSONPath("body"))
        return try transaction(ifMatch: ifMatch, carrying: carried) { reconciler throws(NavigationError) in
            try feature(target, in: reconciler).bind(field, to: value)
            return nil
        }
    }

    /// A user dismissed a presentation. With `button`, that alert button's action runs first, in
    /// the same transaction. Writes `nil`/`false` into the owner's state.
    public func dismiss(presentation id: String, button: String? = nil, ifMatch: Int? = nil) throws(NavigationError) -> Outcome {
        try transaction(ifMatch: ifMatch) { reconciler throws(NavigationError) in
            guard let node = reconciler.node(id), case .presented(let slot, _, let alert) = node.placement,
                  let owner = node.parent else {
                throw .notOnScreen(kind: "presentation", id: id)
            }
            var effect: Effect?
            if let button {
                guard let chosen = alert?.buttons.first(where: { $0.id == button }) else {
                    throw .unknownButton(presentation: id, button: button)
                }
                if let action = chosen.action {
                    effect = try owner.feature.perform(action, arguments: nil)
                }
            }
            reconciler.markRemovedByClient(node)
            if node.isAttached { owner.feature.dismiss(slot: slot) }
            return effect
        }
    }

    /// What a user's pop removes.
    public enum PopRequest: Sendable {
        /// This many elements from the end.
        case count(Int)
        /// Keeps this element on top.
        case to(String)
    }

    /// A user went back: shortens the path.
    public func pop(stack id: String, _ request: PopRequest, ifMatch: Int? = nil) throws(NavigationError) -> Outcome {
        try transaction(ifMatch: ifMatch) { reconciler throws(NavigationError) in
            guard let stack = reconciler.stack(id) else { throw .notOnScreen(kind: "stack", id: id) }
            let keep: Int
            switch request {
            case .count(let count):
                guard !stack.elements.isEmpty else { throw .invalidPop("stack \(id) is empty: there is nothing to pop") }
                guard count >= 1, count <= stack.elements.count else {
                    throw .invalidPop("count must be between 1 and \(stack.elements.count), the depth of stack \(id)")
                }
                keep = stack.elements.count - count
            case .to(let element):
                guard let index = stack.elements.firstIndex(where: { $0.id == element }) else {
                    throw .notOnScreen(kind: "element", id: element)
                }
                keep = index + 1
            }
            for element in stack.elements[keep...] { reconciler.markRemovedByClient(element) }
            stack.owner.feature.truncate(stack: stack.slot, keeping: keep)
            return nil
        }
    }

    /// Pushes onto the nearest stack enclosing `target` (its own first) that accepts the value.
    public func push(from target: String, value: JSON, ifMatch: Int? = nil) throws(NavigationError) -> Outcome {
        let carried = try measure(value, at: JSONPath("value"))
        return try transaction(ifMatch: ifMatch, carrying: carried) { reconciler throws(NavigationError) in
            guard let start = reconciler.node(target) else { throw .notOnScreen(kind: "feature", id: target) }
            var candidate: Node? = start
            while let node = candidate {
                for stack in node.stacks {
                    do throws(StateError) {
                        if try node.feature.push(onto: stack.slot, value) { return nil }
                    } catch {
                        throw .invalidArgument(error)
                    }
                }
                candidate = node.parent
            }
            let described = value.objectValue?.keys.first.map { "\"\($0)\"" } ?? "a \(value.typeName)"
            throw .notAccepted(feature: target, value: described)
        }
    }

    /// After a restore: the effects that were running died with the process, so each feature on
    /// screen settles as if they had been cancelled. Emits (and makes durable) whatever changed.
    /// A deep link settles the same way as it lands (a session made with a state, a
    /// `replaceState`): it sets state and starts no work, so what it says is under way (a loading
    /// flag, an alert's timer) settles as after a restart, and the session behaves alike before
    /// and after one. Not while an effect of the session runs: a raised flag may then be its
    /// work. The session then settles once none runs (a deep link into a session busy with a
    /// fetch still has its own spinners lowered, as a new session with that state would).
    public func settleEffects() throws(NavigationError) -> Outcome {
        guard unfinishedEffects.isEmpty else {
            settleLater()
            return unchanged
        }
        var continued: [Effect] = []
        // Never refused for the budget: a spinner lowered may take a byte more ("false").
        let outcome = try transaction(ifMatch: nil, budgeted: false) { reconciler in
            continued = reconciler.features.compactMap { $0.settle() }
            return nil
        }
        for effect in continued { _ = start(effect) }
        return outcome
    }

    /// Starts what settling the deep link this session was made from continues (a timed
    /// alert's timer, with the time it had left), once the session is hosted. Settles nothing
    /// again: the state was settled as it was made, against the clock of that moment.
    public func startSettledWork() -> Outcome {
        let work = settledWork
        settledWork = []
        for effect in work { _ = start(effect) }
        return unchanged
    }

    /// The session as it is, for a call that changed nothing itself.
    private var unchanged: Outcome {
        Outcome(version: version, events: [], effect: nil, sequenceBefore: lastSequence, through: lastSequence, rollbacks: rollbacks)
    }

    /// A deep link into the running session: replaces the root's state; only the difference is
    /// emitted (rule 7). Models already on screen are updated in place.
    ///
    /// A deep link starts no work, so what its state says is under way settles, within this one
    /// transaction: one version, and no flag raised in one batch and lowered in the next; what
    /// settling continues (a timer with the time it had left) starts with it. Not while an
    /// effect of the session runs: a raised flag may then be its work, and the session settles
    /// once none runs (`settleEffects`).
    public func replaceState(_ state: JSON, ifMatch: Int? = nil) throws(NavigationError) -> Outcome {
        // A state replaced whole can grow by more than it carries (what it leaves out comes back
        // as defaults): it is always measured, as if it could fill the bound.
        _ = try measure(state, at: JSONPath("state"))
        let settles = unfinishedEffects.isEmpty
        var continued: [Effect] = []
        let outcome = try transaction(ifMatch: ifMatch, carrying: limits.maxStateBytes) { reconciler throws(NavigationError) in
            let root = reconciler.root.feature
            do throws(StateError) {
                try root.validateState(state)
                try root.replaceState(with: state)
            } catch {
                throw .invalidState(error)
            }
            if settles { continued = Self.settleShown(by: root) }
            return nil
        }
        if settles {
            for effect in continued { _ = start(effect) }
        } else {
            settleLater()
        }
        return outcome
    }

    /// Settles `feature`, then every feature it shows once settled (an alert it dismissed is
    /// not shown): what a reconciler would put on screen, found from the models without
    /// observing anything, so a state settles before any reconciler shows it (a deep link's, in
    /// its transaction or before its session is made). Returns what settling continues, to be
    /// started by the session.
    static func settleShown(by feature: any AnyLiveFeature) -> [Effect] {
        var continued = feature.settle().map { [$0] } ?? []
        guard let derivation = feature.derive() else { return continued }
        for (_, child) in derivation.presentations { continued += settleShown(by: child.makeFeature()) }
        for contents in derivation.stacks {
            for index in 0..<contents.count { continued += settleShown(by: contents.makeFeature(index)) }
        }
        return continued
    }

    /// Waits (at most `timeout`) for the effects a request started, then returns every event
    /// since the request began, its own included. When the event buffer no longer holds them
    /// all (a busy session, a small `eventBufferCount`), it returns the request's own and says
    /// the rest are not in the answer (`effectsPending`), rather than passing them over.
    public func waitForEffects(of outcome: Outcome, timeout: Duration) async -> Outcome {
        if let id = outcome.effect, unfinishedEffects.contains(id) {
            let wakeup = Wakeup()
            effectWaiters[id, default: []].append(wakeup)
            // Whichever comes first, the effect's end or the deadline, resumes the request.
            let deadline = Task {
                try? await Task.sleep(for: timeout)
                wakeup.fire()
            }
            await wakeup.wait()
            deadline.cancel()
        }
        flush()
        // The version and events as of now; `durable` then holds the answer until they are.
        let (through, version, rollbacks) = (lastSequence, version, rollbacks)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            whenDurable(through: through) { _ in done.resume() }
        }
        let lastDurable = min(through, durability?.durableSequence ?? through)
        let logged = log.events(after: outcome.sequenceBefore, lastIssued: lastDurable)
        let running = outcome.effect.map { unfinishedEffects.contains($0) } ?? false
        let pending = running || (logged == nil && lastDurable > outcome.through)
        let events = logged ?? outcome.events
        return Outcome(version: version, events: events, effect: nil, sequenceBefore: outcome.sequenceBefore, through: through,
                       rollbacks: rollbacks, effectsPending: pending)
    }

    /// Why a session ended, as its `end` event says.
    public enum EndReason: String, Sendable {
        /// `DELETE /sessions/{id}`.
        case deleted
        /// Nobody used it for the idle TTL.
        case expired
        /// The server stopped and keeps no sessions (`--store memory`).
        case shutdown
    }

    /// Ends the session: cancels its effects and publishes `end` with the reason. Events still on
    /// their way to the journal go out first; the session is over, so they need not be durable.
    public func end(_ reason: EndReason) {
        guard endEvent == nil else { return }
        // After a deletion decided on a version, what effects changed since is not published.
        if !isClosing { flush() }
        for task in runningEffects.values { task.cancel() }
        runningEffects.removeAll()
        if var durability {
            for write in durability.inFlight { publishDurable(write.entry.events) }
            durability.finishAll(success: true)
            self.durability = nil
        }
        endEvent = commit([(.end, .object(JSONObject([("reason", .string(reason.rawValue))])))]).first
        for wakeup in effectWaiters.values.joined() { wakeup.fire() }
        effectWaiters.removeAll()
    }

    /// Before a deletion is made durable: refuses it unless the session is at version `ifMatch`
    /// (when given), and then every transaction until the deletion is over (`reopen()` if it
    /// failed), so what is deleted is the version the check saw.
    public func close(ifMatch: Int?) throws(NavigationError) {
        guard endEvent == nil else { throw .sessionEnded }
        guard !isClosing else { throw .sessionEnding }
        flush()
        if let ifMatch, ifMatch != version { throw .versionMismatch(expected: ifMatch, current: version) }
        isClosing = true
    }

    /// After a deletion that did not happen: the session takes transactions again, and what
    /// its effects changed meanwhile is published.
    public func reopen() {
        isClosing = false
        flush()
    }

    /// Closes the session without `end`, because it is not over: the server stops and keeps it.
    /// Effects are cancelled; what they had not finished settles when the session is restored.
    public func suspend() {
        isSuspended = true
        for task in runningEffects.values { task.cancel() }
        runningEffects.removeAll()
        for wakeup in effectWaiters.values.joined() { wakeup.fire() }
        effectWaiters.removeAll()
    }

    // MARK: - Durability

    /// Runs `body` on the session's actor from start to end: a request's change, its wait until
    /// the change is durable and its answer take one hop onto the actor, not one per step.
    public func run<T: Sendable>(_ body: @Sendable (isolated NavigationSession) async throws(NavigationError) -> T) async throws(NavigationError) -> T {
        try await body(self)
    }

    /// Runs `body` on the session's executor: in place when called there (a request on the
    /// session's own event loop), otherwise after what is queued there.
    public nonisolated func isolated(_ body: @escaping @Sendable (isolated NavigationSession) -> Void) {
        if executor.isCurrent {
            assumeIsolated(body)
        } else {
            executor.execute { self.assumeIsolated(body) }
        }
    }

    /// An effect's first change since the last batch is published after the turn in progress;
    /// the state as it stood before that change is kept first, for `flush` to measure it.
    private nonisolated func watchEffects() {
        tracker.onFlushNeeded { [weak self] in
            guard let self else { return }
            if self.executor.isCurrent { self.assumeIsolated { $0.keepStateBeforeEffect() } }
            self.afterThisTurn { $0.flush() }
        }
    }

    /// Runs `body` on the session's executor after what is queued there, never in place: what
    /// the session reacts to (an effect's change, a write's outcome) waits for the turn in
    /// progress to end, so every change of one turn lands in one batch.
    private nonisolated func afterThisTurn(_ body: @escaping @Sendable (isolated NavigationSession) -> Void) {
        executor.execute { self.assumeIsolated(body) }
    }

    /// Waits until what `outcome` changed is durable. Without a journal, at once.
    public func durable(_ outcome: Outcome) async throws(NavigationError) -> Outcome {
        let result = await withCheckedContinuation { (done: CheckedContinuation<Result<Outcome, NavigationError>, Never>) in
            whenDurable(outcome, on: executor) { done.resume(returning: $0) }
        }
        return try result.get()
    }

    /// Calls `done` on `executor` once what `outcome` changed is durable: at once without a
    /// journal, or with `storageUnavailable` when a failed write undid it. A request waits this
    /// way without a task of its own.
    ///
    /// The answer comes from the store's own notice of the write that carries the change, not
    /// from the session hearing of it: that would put a hop to the session's loop, and the wait
    /// for the loop's turn, between every commit and its answers. The notice is enough: a
    /// journal makes a write durable only after every earlier one, and fails every later write
    /// of the generation once one fails (`SessionJournal`). What the client does next still
    /// finds the session caught up: the session's own notice is queued on its loop before any
    /// answer from the store's, and a write the store has settled already (a request that
    /// changed nothing, covered by an earlier one; a refusal quicker than the request) is
    /// answered the old way, after the session has heard of it, since an answer queued on the
    /// loop from here would run before the notice waiting in the loop's inbox.
    public func whenDurable(_ outcome: Outcome, on executor: any SessionExecutor,
                            _ done: @escaping @Sendable (Result<Outcome, NavigationError>) -> Void) {
        // Kept in memory and answered where it was asked: at once, with nothing to wrap.
        if durability == nil, outcome.rollbacks == rollbacks, executor.isCurrent { return done(.success(outcome)) }
        let deliver: @Sendable (Bool) -> Void = { succeeded in
            done(succeeded ? .success(outcome) : .failure(.storageUnavailable))
        }
        // A failed write rolled the session back after this change was made: it never happened,
        // and its event ids will be issued again for other changes.
        guard outcome.rollbacks == rollbacks else { return Self.run(on: executor) { deliver(false) } }
        // Read in place, not copied out whole: this runs for every request.
        guard let durableSequence = durability?.durableSequence, durableSequence < outcome.through else {
            return Self.run(on: executor) { deliver(true) }
        }
        if let write = durability?.inFlight.first(where: { $0.entry.lastSequence >= outcome.through }),
           write.notice.whenSettled({ succeeded in executor.execute { deliver(succeeded) } }) {
            return
        }
        whenDurable(through: outcome.through) { succeeded in Self.run(on: executor) { deliver(succeeded) } }
    }

    /// Runs `body` in place when the caller is on `executor`, else queued there.
    private static func run(on executor: any SessionExecutor, _ body: @escaping @Sendable () -> Void) {
        if executor.isCurrent { body() } else { executor.execute(body) }
    }

    private func whenDurable(through sequence: Int, _ done: @escaping @Sendable (Bool) -> Void) {
        guard let durableSequence = durability?.durableSequence, durableSequence < sequence else { return done(true) }
        durability?.waiters.append(DurabilityWaiter(sequence: sequence, done: done))
    }

    /// Hands a batch to the journal at once: it need not wait for the session's previous write,
    /// so it can share that write's commit or the next one.
    private func write(_ entry: JournalEntry, into durability: inout Durability) {
        let number = durability.writesMade
        durability.writesMade += 1
        let notice = WriteNotice()
        durability.inFlight.append(InFlightWrite(number: number, entry: entry, notice: notice))
        durability.journal.write([entry], generation: rollbacks) { [weak self] success in
            // The session first, so that it has caught up by the time anyone is answered.
            self?.afterThisTurn { $0.written(number, success: success) }
            notice.settle(success)
        }
    }

    /// Completions may arrive in any order; writes take effect in the order they were made.
    private func written(_ number: Int, success: Bool) {
        // Taken out while it changes, so its arrays are not copied on every append.
        guard var durability = durability.take() else { return }
        // A write from before a rollback: it failed with the one that caused it.
        guard let index = durability.inFlight.firstIndex(where: { $0.number == number }) else {
            self.durability = durability
            return
        }
        durability.inFlight[index].succeeded = success
        while let first = durability.inFlight.first, let succeeded = first.succeeded {
            guard succeeded else {
                rollBack(durability)
                return
            }
            durability.inFlight.removeFirst()
            let entry = first.entry
            durability.entriesSinceSnapshot.append(entry)
            if let snapshot = entry.snapshot {
                durability.snapshot = snapshot
                durability.entriesSinceSnapshot = []
            }
            durability.durableSequence = entry.lastSequence
            publishDurable(entry.events)
        }
        durability.wakeWaiters()
        self.durability = durability
    }

    private func publishDurable(_ events: [NavigationEvent]) {
        let mayGrow = limits.memory?.isSpent != true
        for event in events { log.append(event, mayGrow: mayGrow) }
        recharge()
        publish?(events)
    }

    /// Brings the session's charge in `limits.memory` up to date with its state and kept events.
    private func recharge() {
        guard let memory = limits.memory else { return }
        let now = MemoryBudget.charge(features: reconciler.nodeCount, stateBytes: reconciler.stateBytes, eventBytes: log.bytes)
        memory.charge(now - charged)
        charged = now
    }

    /// Whether the change under way is refused for the budget: it is spent, and the change would
    /// grow the state by more than a small step, or by anything once the headroom is spent too.
    private func growthExceedsBudget() -> Bool {
        guard let memory = limits.memory, memory.isSpent else { return false }
        let growth = reconciler.prospectiveStateBytes() - reconciler.stateBytes
        return growth > 0 && (growth > MemoryBudget.smallGrowth || memory.headroomIsSpent)
    }

    /// A write failed: nothing of it, nor of what was queued behind it, happened. The session
    /// becomes what is durable again, and the requests waiting for those writes are refused.
    private func rollBack(_ failed: Durability) {
        var durability = failed
        durability.finishAll(success: false)
        for task in runningEffects.values { task.cancel() }
        runningEffects.removeAll()
        for wakeup in effectWaiters.values.joined() { wakeup.fire() }
        effectWaiters.removeAll()
        reconciler.discardChanges()
        if let durable = try? durability.snapshot.applying(durability.entriesSinceSnapshot),
           let root = try? rebuild(durable.state),
           let restored = try? Reconciler(root: root, tracker: tracker, restoring: durable.navigation, nextSerial: durable.nextSerial) {
            reconciler = restored
            version = durable.version
            lastSequence = durable.lastSequence
            durability.recorded = durable.state
            durability.snapshot = durable
            durability.entriesSinceSnapshot = []
        }
        // The failed write may have carried the snapshot the counters were reset for.
        durability.takeSnapshotNext()
        self.durability = durability
        recharge()
        rollbacks += 1
        rolledBack?()
        settleLater()
    }

    /// The effects a rollback cancelled leave their marks in the durable state (a spinner, an
    /// alert's timer), and so does a deep link that arrives while an effect runs: they settle
    /// as after a restart, once the store takes writes again and no effect runs. Looked at once
    /// a second: tried only while the store is known to take writes (a failed try would roll the
    /// session back, and close its streams, again) and no effect of the session runs
    /// (`settleEffects` would leave everything as it is).
    private func settleLater() {
        guard !settlingIsScheduled else { return }
        settlingIsScheduled = true
        Task { [weak self] in
            try? await Task.sleep(for: Self.settlingDelay)
            await self?.settleWhenIdle()
        }
    }

    private func settleWhenIdle() {
        settlingIsScheduled = false
        guard endEvent == nil, !isSuspended else { return }
        guard durability?.journal.takesWrites ?? true, unfinishedEffects.isEmpty, !isClosing else { return settleLater() }
        _ = try? settleEffects()
    }


    // MARK: - Transactions

    private func feature(_ id: String, in reconciler: Reconciler) throws(NavigationError) -> any AnyLiveFeature {
        guard let node = reconciler.node(id) else { throw .notOnScreen(kind: "feature", id: id) }
        return node.feature
    }

    /// A value a client sent, refused before anything changes when it exceeds the limits.
    /// Returns its size, which the transaction bringing it counts toward the state's bound.
    private func measure(_ value: JSON, at path: JSONPath) throws(NavigationError) -> Int {
        do throws(StateError) {
            try limits.check(value, at: path)
        } catch {
            throw .tooLarge(error)
        }
        return JSONWriter.size(value)
    }

    private func transaction(
        ifMatch: Int?,
        carrying carriedBytes: Int = 0,
        budgeted: Bool = true,
        _ body: (Reconciler) throws(NavigationError) -> Effect?
    ) throws(NavigationError) -> Outcome {
        guard endEvent == nil else { throw .sessionEnded }
        guard !isClosing else { throw .sessionEnding }
        flush()
        if let ifMatch, ifMatch != version { throw .versionMismatch(expected: ifMatch, current: version) }
        let sequenceBefore = lastSequence
        // Near a limit, keep the state as it was, so a transaction that would cross it can be
        // undone. Far from every limit no transaction of the hosted features can cross one, and
        // this costs nothing.
        // With the budget spent, any change that grows the state may be refused: kept too, but
        // its encodings only as `encodeState` would keep them, so a tight budget holds no more.
        let near = isNearLimits(carrying: carriedBytes)
        let undo = near || (budgeted && limits.memory?.isSpent == true)
            ? reconciler.encodeState(keeping: near || durability != nil) : nil
        tracker.setInTransaction(true)
        let effectID: Int?
        do throws(NavigationError) {
            // An effect starts within the transaction: what it changes before it first waits
            // is part of it, and measured with it.
            effectID = try body(reconciler).map(start)
            if let undo, let refusal = refusal(carrying: carriedBytes, budgeted: budgeted) {
                if let effectID { runningEffects[effectID]?.cancel() }
                restore(undo)
                throw refusal
            }
        } catch {
            reconciler.cancelClientRemovals()
            tracker.setInTransaction(false)
            // What the refused change touched was undone, but its models' observations fired
            // and end with that: reconciled now, they are observed again (an effect's later
            // change is heard), and the tree and the models agree.
            if !tracker.peek().isEmpty { commit(reconciler.reconcile()) }
            throw error
        }
        tracker.setInTransaction(false)
        let events = commit(reconciler.reconcile())
        return Outcome(version: version, events: events, effect: effectID, sequenceBefore: sequenceBefore, through: lastSequence,
                       rollbacks: rollbacks)
    }

    /// Undoes a refused transaction: the state it found, shown by the same screens with the same
    /// ids. Set back in place, a model the transaction replaced (another enum case, another
    /// element) would be a new object, shown as a new screen; then the session is rebuilt from
    /// the state instead, as after a restart, and the effects that ran in the models it drops are
    /// cancelled, their features settling as if they had been.
    private func restore(_ state: JSON) {
        let tree = reconciler.root.json
        try? reconciler.root.feature.replaceState(with: state)
        if !reconciler.keepsEveryScreen() { rebuild(from: state, shownAs: tree) }
        recharge()
    }

    /// Makes the session anew from `state`, shown as `tree` with the same ids, as after a
    /// restart. Every model is new, so every effect running (in the models dropped) is
    /// cancelled, and their features settle as if they had been. Changes nothing if the state
    /// does not derive the tree.
    private func rebuild(from state: JSON, shownAs tree: JSON) {
        guard let root = try? rebuild(state),
              let restored = try? Reconciler(root: root, tracker: tracker, restoring: tree, nextSerial: reconciler.serialCounter)
        else { return }
        reconciler = restored
        _ = tracker.drain()
        for task in runningEffects.values { task.cancel() }
        settleLater()
    }

    /// Why the change under way may not be committed, if it may not: it would cross a limit, or
    /// grow the session while the budget is spent.
    private func refusal(carrying carriedBytes: Int, budgeted: Bool) -> NavigationError? {
        if let violation = reconciler.prospectiveViolation(of: limits, carriedBytes: carriedBytes) {
            return .tooLarge(StateError(JSONPath("state"), violation))
        }
        if budgeted, growthExceedsBudget(), let memory = limits.memory { return .memorySpent(limit: memory.limit) }
        return nil
    }

    /// A transaction of the hosted features grows a stack or the tree by a feature or a few, and
    /// a state by what the request carries and what its effect brings before it first waits (a
    /// string's worth at most), perhaps twice over (a value kept and shown): under half of every
    /// bound, none can cross one.
    private func isNearLimits(carrying carriedBytes: Int) -> Bool {
        reconciler.nodeCount * 2 >= limits.maxNodes || reconciler.longestStack * 2 >= limits.maxPathLength
            || reconciler.deepest + 1 >= limits.maxDepth
            || (reconciler.stateBytes + carriedBytes + limits.maxStringBytes) * 2 >= limits.maxStateBytes
    }

    /// Starts an effect right here, so its synchronous part belongs to this transaction.
    private func start(_ effect: Effect) -> Int {
        let id = nextEffectID
        nextEffectID += 1
        unfinishedEffects.insert(id)
        // The owner is bound around the task's creation, which copies it: the async `withValue`
        // would run the effect off this actor, and after this transaction rather than in it.
        let task = EffectOwner.$current.withValue(EffectOwner(self)) { () -> Task<Void, Never> in
            if #available(macOS 26, iOS 26, *) {
                return Task.immediate { [self] in
                    await effect.operation()
                    self.finishEffect(id)
                }
            }
            // Older Apple systems have no Task.immediate: there the effect starts on this actor
            // just after the transaction, so what it changes before it first suspends is a
            // batch of its own. Linux always takes the branch above.
            return Task { [self] in
                await effect.operation()
                self.finishEffect(id)
            }
        }
        if unfinishedEffects.contains(id) { runningEffects[id] = task }
        return id
    }

    private func finishEffect(_ id: Int) {
        unfinishedEffects.remove(id)
        runningEffects[id] = nil
        for wakeup in effectWaiters.removeValue(forKey: id) ?? [] { wakeup.fire() }
    }

    /// Reconciles what changed outside a request (an effect resuming) as its own batch. A change
    /// that would take the session past a bound, or grow it past the budget, is dropped, the
    /// effect that made it treated as cancelled: there is no request to refuse, and the bound holds all the same. Effects whose
    /// changes land in the same turn are measured, and dropped, together.
    func flush() {
        // Nothing follows `end`: what cancelled effects change on their way out is not news.
        guard endEvent == nil else {
            stateBeforeEffect = nil
            return
        }
        // Nothing changes while a deletion decided on this version is on its way either; should it
        // fail, the flush after `reopen` measures what the effects changed meanwhile against the
        // state from before, kept until then.
        guard !isClosing else { return }
        let before = stateBeforeEffect
        stateBeforeEffect = nil
        // Measured as a request near every bound is (the byte bound's walk forced), since what
        // an effect brings is not known in advance.
        if let before, refusal(carrying: limits.maxStateBytes, budgeted: true) != nil {
            tracker.setInTransaction(true)
            restore(before)
            tracker.setInTransaction(false)
            settleLater()
        }
        commit(reconciler.reconcile())
    }

    /// The full state. Its encodings are kept from one call to the next only where the next
    /// comes soon: a durable session encodes every batch (`commit`), and one near a bound
    /// before every transaction. Any other encodes now and then (a read, a stream's snapshot),
    /// and keeping its encodings would hold a copy of its state for nothing.
    private func encodeState() -> JSON? {
        reconciler.encodeState(keeping: durability != nil || isNearLimits(carrying: 0))
    }

    /// The state before an effect's first change since the last batch, so that `flush` can drop
    /// a change that would take the state past its byte bound. Kept for every effect, wherever
    /// the session stands: what an effect brings is the feature's own business (a fact, several
    /// at once, a text that escapes to six times its bytes), so no margin tells which can cross.
    private var stateBeforeEffect: JSON?

    private func keepStateBeforeEffect() {
        guard stateBeforeEffect == nil, endEvent == nil else { return }
        stateBeforeEffect = encodeState()
    }

    @discardableResult
    private func commit(_ batch: [(NavigationEvent.Kind, JSON)]) -> [NavigationEvent] {
        guard !batch.isEmpty else { return [] }
        version += 1
        let events = batch.map { kind, data in
            lastSequence += 1
            return NavigationEvent(sequence: lastSequence, kind: kind, data: data)
        }
        guard durability != nil, events.first?.kind != .end, var durability = durability.take() else {
            publishDurable(events)
            return events
        }
        // What the store keeps per batch is its events and a patch of the state, never the
        // state whole; a snapshot every so often bounds what a restart must replay, and lets
        // the store drop what came before it.
        durability.count(events)
        let snapshotIsDue = durability.snapshotIsDue(limits, stateBytes: reconciler.stateBytes)
        // A snapshot is encoded afresh, and what is kept starts over from it: a change a feature
        // made unobserved (see `EncodedStates`) is stored by the next snapshot at the latest.
        let state = reconciler.encodeState(keeping: !snapshotIsDue) ?? .null
        let patch = JSONPatch.diff(from: durability.recorded, to: state)
        durability.recorded = state
        var snapshot: DurableSession?
        if !snapshotIsDue {
            durability.count(patch: patch)
        } else {
            snapshot = DurableSession(version: version, lastSequence: lastSequence, nextSerial: reconciler.serialCounter,
                                      state: state, navigation: reconciler.root.json)
            durability.resetCounts()
        }
        write(JournalEntry(version: version, lastSequence: lastSequence, nextSerial: reconciler.serialCounter,
                           events: events, statePatch: patch, snapshot: snapshot), into: &durability)
        self.durability = durability
        recharge()
        return events
    }
}

/// A one-time signal a waiting request suspends on; firing it twice is harmless.
final class Wakeup: Sendable {
    private enum State {
        case idle
        case waiting(CheckedContinuation<Void, Never>)
        case fired
    }

    private let state = Mutex(State.idle)

    func wait() async {
        await withCheckedContinuation { continuation in
            let firedAlready = state.withLock { state in
                if case .fired = state { return true }
                state = .waiting(continuation)
                return false
            }
            if firedAlready { continuation.resume() }
        }
    }

    func fire() {
        let waiting = state.withLock { state -> CheckedContinuation<Void, Never>? in
            defer { state = .fired }
            if case .waiting(let continuation) = state { return continuation }
            return nil
        }
        waiting?.resume()
    }
}

/// A durable session's bookkeeping: what is durable, what is being written, what waits.
private struct Durability {
    /// Batches between snapshots at most.
    static let snapshotEvery = 64
    /// Below this, a journal since the snapshot is small enough whatever the state: small states
    /// are left to `snapshotEvery`, which keeps a counter's journal rows tiny.
    static let journalBytesFloor = 64 * 1024

    let journal: any SessionJournal
    /// The last durable snapshot and the durable entries since: what a rollback goes back to.
    var snapshot: DurableSession
    var entriesSinceSnapshot: [JournalEntry] = []
    /// The state as of the last batch handed over: the base of the next patch.
    var recorded: JSON
    var durableSequence: Int
    /// Handed to the journal and not yet durable, oldest first.
    var inFlight: [InFlightWrite] = []
    var writesMade = 0
    var waiters: [DurabilityWaiter] = []
    private var batchesSinceSnapshot = 0
    private var eventsSinceSnapshot = 0
    private var eventBytesSinceSnapshot = 0
    /// Events and state patches since the snapshot, as encoded: what `entriesSinceSnapshot`
    /// holds, which no budget counts.
    private var journalBytesSinceSnapshot = 0

    init(journal: any SessionJournal, durable: DurableSession) {
        self.journal = journal
        self.snapshot = durable
        self.recorded = durable.state
        self.durableSequence = durable.lastSequence
    }

    /// Counts a batch written since the last snapshot.
    mutating func count(_ events: [NavigationEvent]) {
        batchesSinceSnapshot += 1
        eventsSinceSnapshot += events.count
        let eventBytes = events.reduce(0) { $0 + $1.encodedData.count }
        eventBytesSinceSnapshot += eventBytes
        journalBytesSinceSnapshot += eventBytes
    }

    /// Counts a batch's state patch, once made: it weighs in the next batch's decision.
    mutating func count(patch: JSON) {
        journalBytesSinceSnapshot += JSONWriter.size(patch)
    }

    mutating func takeSnapshotNext() {
        batchesSinceSnapshot = Self.snapshotEvery
    }

    mutating func resetCounts() {
        batchesSinceSnapshot = 0
        eventsSinceSnapshot = 0
        eventBytesSinceSnapshot = 0
        journalBytesSinceSnapshot = 0
    }

    /// Whether the next batch should carry a snapshot: every so many batches, and before the
    /// events since the last one outgrow half the event buffer, by count or by bytes, so that
    /// the store can always drop what a snapshot covers and still keep every event a restart
    /// needs to replay; and once the journal since the last one outgrows the state itself, so
    /// that what a rollback keeps (`entriesSinceSnapshot`) stays within the state's size and one
    /// batch: a session whose large state is replaced again and again would otherwise hold
    /// megabytes of patches and events that its budget, which counts the state and the kept
    /// events, never sees.
    func snapshotIsDue(_ limits: SessionLimits, stateBytes: Int) -> Bool {
        batchesSinceSnapshot >= Self.snapshotEvery
            || eventsSinceSnapshot * 2 >= max(2, limits.eventBufferCount)
            || eventBytesSinceSnapshot * 2 >= max(2, limits.eventBufferBytes)
            || journalBytesSinceSnapshot >= max(stateBytes, Self.journalBytesFloor)
    }

    mutating func wakeWaiters() {
        waiters.removeAll { waiter in
            guard waiter.sequence <= durableSequence else { return false }
            waiter.finish(success: true)
            return true
        }
    }

    mutating func finishAll(success: Bool) {
        for waiter in waiters { waiter.finish(success: success) }
        waiters = []
        inFlight = []
    }
}

/// A batch handed to the journal, and what became of it (nil: not known yet).
private struct InFlightWrite {
    let number: Int
    let entry: JournalEntry
    /// What the store said, for the requests that wait on this write from outside the session.
    let notice: WriteNotice
    var succeeded: Bool?
}

/// What became of one write, as the store tells it (on the store's thread), to whoever
/// registered before it did.
private final class WriteNotice: Sendable {
    /// Who waits for the notice; nil once it came.
    private let waiting = Mutex<[@Sendable (Bool) -> Void]?>([])

    /// Registers `body` for the store's notice; false, without it, when the notice came already.
    func whenSettled(_ body: @escaping @Sendable (Bool) -> Void) -> Bool {
        waiting.withLock { waiting in
            guard waiting != nil else { return false }
            waiting?.append(body)
            return true
        }
    }

    func settle(_ succeeded: Bool) {
        for body in waiting.withLock({ $0.take() }) ?? [] { body(succeeded) }
    }
}

/// A request waiting for its batch to be durable.
private struct DurabilityWaiter {
    let sequence: Int
    let done: @Sendable (Bool) -> Void

    func finish(success: Bool) { done(success) }
}
