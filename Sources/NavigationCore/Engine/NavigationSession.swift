import Synchronization

/// One user's navigation: a root feature, the tree it derives, and the events that got it there.
///
/// Each session is an actor, so its models are only ever touched on its own serial executor, and
/// different sessions run in parallel. Every request is a transaction: it first publishes what
/// effects changed meanwhile, then checks its target against the fresh tree, changes state and
/// reconciles, emitting one contiguous batch.
public actor NavigationSession {
    public nonisolated let feature: String
    public private(set) var version = 0
    private var lastSequence = 0
    private let reconciler: Reconciler
    private let tracker: ChangeTracker
    private var log: EventLog
    private var publish: (@Sendable ([NavigationEvent]) -> Void)?
    private var runningEffects: [Int: Task<Void, Never>] = [:]
    private var unfinishedEffects: Set<Int> = []
    /// Requests waiting for an effect to finish (`?wait=true`), by effect.
    private var effectWaiters: [Int: [Wakeup]] = [:]
    private var endEvent: NavigationEvent?
    private var nextEffectID = 0
    public nonisolated let limits: SessionLimits

    init(feature: String, root: sending any AnyLiveFeature, limits: SessionLimits) {
        self.feature = feature
        self.limits = limits
        let tracker = ChangeTracker()
        self.tracker = tracker
        self.reconciler = Reconciler(root: root, tracker: tracker)
        self.log = EventLog(capacity: limits.eventBufferCount, byteLimit: limits.eventBufferBytes)
        tracker.onFlushNeeded { [weak self] in
            guard let self else { return }
            Task { await self.flush() }
        }
    }

    /// What a request changed.
    public struct Outcome: Sendable {
        public let version: Int
        public let events: [NavigationEvent]
        let effect: Int?
        let sequenceBefore: Int
    }

    /// How a new subscriber starts: the events it missed, or a snapshot of the whole tree.
    public enum Start: Sendable {
        case resume([NavigationEvent])
        case snapshot(NavigationEvent)
        /// The session has ended; here is its `end` event.
        case ended(NavigationEvent)
    }

    /// Receives every batch, in order, on the session's executor. Set once, by whoever hosts it.
    public func onEvents(_ body: @escaping @Sendable ([NavigationEvent]) -> Void) {
        publish = body
    }

    // MARK: - Reading

    public func navigation() -> JSON {
        flush()
        return reconciler.root.json
    }

    /// `version`, the full state (children included) and the navigation tree, read together.
    public func describe() -> (version: Int, state: JSON, navigation: JSON) {
        flush()
        return (version, reconciler.root.feature.encodeState() ?? .null, reconciler.root.json)
    }

    /// Runs `body` on the session's executor with the events after `lastEventID`, or a snapshot
    /// when there is no id or it is too old or unknown. Nothing is published in between, so a
    /// subscriber registered in `body` misses nothing and gets nothing twice.
    public func attach<Result: Sendable>(after lastEventID: Int?, _ body: @Sendable (Start) -> Result) -> Result {
        if let endEvent { return body(.ended(endEvent)) }
        flush()
        if let lastEventID, let missed = log.events(after: lastEventID, lastIssued: lastSequence) {
            return body(.resume(missed))
        }
        return body(.snapshot(snapshot()))
    }

    func snapshot() -> NavigationEvent {
        NavigationEvent(sequence: lastSequence, kind: .snapshot, data: .object(JSONObject([
            ("version", .int(version)), ("navigation", reconciler.root.json),
        ])))
    }

    /// The events that build the initial tree from an empty screen (rule 7).
    func initialEvents() -> [(NavigationEvent.Kind, JSON)] { reconciler.initialEvents }

    // MARK: - Requests

    public func perform(target: String, action: String, arguments: JSON?, ifMatch: Int? = nil) throws(NavigationError) -> Outcome {
        if let arguments { try measure(arguments, at: JSONPath("args")) }
        return try transaction(ifMatch: ifMatch) { reconciler throws(NavigationError) in
            try feature(target, in: reconciler).perform(action, arguments: arguments)
        }
    }

    public func bind(target: String, field: String, value: JSON, ifMatch: Int? = nil) throws(NavigationError) -> Outcome {
        try measure(value, at: JSONPath("body"))
        return try transaction(ifMatch: ifMatch) { reconciler throws(NavigationError) in
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

    public enum PopRequest: Sendable {
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
        try measure(value, at: JSONPath("value"))
        return try transaction(ifMatch: ifMatch) { reconciler throws(NavigationError) in
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

    /// A deep link into the running session: replaces the state. Models already on screen are
    /// updated in place, so only the difference is emitted.
    public func replaceState(_ state: JSON, ifMatch: Int? = nil) throws(NavigationError) -> Outcome {
        try measure(state, at: JSONPath("state"))
        return try transaction(ifMatch: ifMatch) { reconciler throws(NavigationError) in
            let root = reconciler.root.feature
            do throws(StateError) {
                try root.validateState(state)
                try root.replaceState(with: state)
            } catch {
                throw .invalidState(error)
            }
            return nil
        }
    }

    /// Waits (at most `timeout`) for the effects a request started, then returns every event
    /// since the request began, its own included.
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
        let events = log.events(after: outcome.sequenceBefore, lastIssued: lastSequence) ?? outcome.events
        return Outcome(version: version, events: events, effect: nil, sequenceBefore: outcome.sequenceBefore)
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

    /// Ends the session: cancels its effects and publishes `end` with the reason.
    public func end(_ reason: EndReason) {
        guard endEvent == nil else { return }
        flush()
        for task in runningEffects.values { task.cancel() }
        runningEffects.removeAll()
        endEvent = commit([(.end, .object(JSONObject([("reason", .string(reason.rawValue))])))]).first
        for wakeup in effectWaiters.values.joined() { wakeup.fire() }
        effectWaiters.removeAll()
    }

    // MARK: - Transactions

    private func feature(_ id: String, in reconciler: Reconciler) throws(NavigationError) -> any AnyLiveFeature {
        guard let node = reconciler.node(id) else { throw .notOnScreen(kind: "feature", id: id) }
        return node.feature
    }

    /// A value a client sent, refused before anything changes when it exceeds the limits.
    private func measure(_ value: JSON, at path: JSONPath) throws(NavigationError) {
        do throws(StateError) {
            try limits.check(value, at: path)
        } catch {
            throw .tooLarge(error)
        }
    }

    private func transaction(
        ifMatch: Int?,
        _ body: (Reconciler) throws(NavigationError) -> Effect?
    ) throws(NavigationError) -> Outcome {
        guard endEvent == nil else { throw .sessionEnded }
        flush()
        if let ifMatch, ifMatch != version { throw .versionMismatch(expected: ifMatch, current: version) }
        let sequenceBefore = lastSequence
        // Near a limit, keep the state as it was, so a transaction that would cross it can be
        // undone. Far from every limit no transaction of the hosted features can cross one, and
        // this costs nothing.
        let undo = isNearLimits ? reconciler.root.feature.encodeState() : nil
        tracker.setInTransaction(true)
        let effect: Effect?
        do throws(NavigationError) {
            effect = try body(reconciler)
            if let undo, let violation = reconciler.prospectiveViolation(of: limits) {
                try? reconciler.root.feature.replaceState(with: undo)
                throw NavigationError.tooLarge(StateError(JSONPath("state"), violation))
            }
        } catch {
            reconciler.cancelClientRemovals()
            tracker.setInTransaction(false)
            throw error
        }
        let effectID = effect.map(start)
        tracker.setInTransaction(false)
        let events = commit(reconciler.reconcile())
        return Outcome(version: version, events: events, effect: effectID, sequenceBefore: sequenceBefore)
    }

    private var isNearLimits: Bool {
        reconciler.nodeCount * 2 >= limits.maxNodes || reconciler.longestStack * 2 >= limits.maxPathLength
    }

    /// Starts an effect right here, so its synchronous part belongs to this transaction.
    private func start(_ effect: Effect) -> Int {
        let id = nextEffectID
        nextEffectID += 1
        unfinishedEffects.insert(id)
        let task = Task.immediate { [self] in
            await effect.operation()
            self.finishEffect(id)
        }
        if unfinishedEffects.contains(id) { runningEffects[id] = task }
        return id
    }

    private func finishEffect(_ id: Int) {
        unfinishedEffects.remove(id)
        runningEffects[id] = nil
        for wakeup in effectWaiters.removeValue(forKey: id) ?? [] { wakeup.fire() }
    }

    /// Reconciles what changed outside a request (an effect resuming) as its own batch.
    func flush() {
        commit(reconciler.reconcile())
    }

    @discardableResult
    private func commit(_ batch: [(NavigationEvent.Kind, JSON)]) -> [NavigationEvent] {
        guard !batch.isEmpty else { return [] }
        version += 1
        let events = batch.map { kind, data in
            lastSequence += 1
            return NavigationEvent(sequence: lastSequence, kind: kind, data: data)
        }
        for event in events { log.append(event) }
        publish?(events)
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
