import Observation

/// Derives the navigation tree from state and emits the difference from the tree it last emitted.
///
/// Each feature instance is observed on its own (`withObservationTracking`), so a change to one
/// feature re-derives that feature only. A batch lists removals first (deepest first), then
/// additions (parents before children), then `state` changes: the order a client can apply
/// blindly (API.md, rules 1–8).
final class Reconciler {
    private(set) var root: Node!
    private var nodesBySerial: [Int: Node] = [:]
    private var nodesByID: [String: Node] = [:]
    private var stacksByID: [String: StackNode] = [:]
    private var nextSerial = 1
    private var highestRestoredSerial = 0
    private let tracker: ChangeTracker
    /// Nodes a client removed in this transaction; their events say `origin: client`.
    private var clientRemovals: Set<Int> = []
    /// The encoded states of the features on screen, from one encoding of the state to the next.
    private let encodedStates = EncodedStates()

    /// Removals of one transaction, grouped by the subtree they take away, so the batch can list
    /// unrelated subtrees in tree order whichever feature noticed its change first.
    private var removalGroups: [(position: TreePosition, events: [(NavigationEvent.Kind, JSON)])] = []
    private var removals: [(NavigationEvent.Kind, JSON)] = []
    private var additions: [(NavigationEvent.Kind, JSON)] = []
    private var changes: [(NavigationEvent.Kind, JSON)] = []

    /// The events that build the initial tree from an empty screen; rule 7 says replaying them
    /// must give the same tree as the snapshot.
    private(set) var initialEvents: [(NavigationEvent.Kind, JSON)] = []

    init(root feature: any AnyLiveFeature, tracker: ChangeTracker) {
        self.tracker = tracker
        let root = Node(id: "root", serial: 0, feature: feature, parent: nil, placement: .root)
        register(root)
        self.root = root
        build(root, restoring: nil)
        initialEvents = takeBatch()
    }

    /// Rebuilds the tree clients hold after a restart: the same screens, with the ids `tree`
    /// gives them, and ids for new screens continuing from `nextSerial`. Fails when the state
    /// does not derive that very tree.
    init(root feature: any AnyLiveFeature, tracker: ChangeTracker, restoring tree: JSON, nextSerial: Int) throws(RestoreError) {
        self.tracker = tracker
        let root = Node(id: "root", serial: 0, feature: feature, parent: nil, placement: .root)
        register(root)
        self.root = root
        self.nextSerial = max(1, nextSerial)
        build(root, restoring: tree)
        _ = takeBatch()
        guard root.json == tree else { throw RestoreError(description: "the state does not derive the stored navigation tree") }
        guard self.nextSerial == max(1, nextSerial), highestRestoredSerial < self.nextSerial else {
            throw RestoreError(description: "the stored tree and counters disagree")
        }
    }

    struct RestoreError: Error, CustomStringConvertible {
        let description: String
    }

    /// The next number for an id: stored with every durable change, so ids are never reused.
    var serialCounter: Int { nextSerial }

    func node(_ id: String) -> Node? { nodesByID[id] }
    /// Every feature on screen, in no particular order.
    var features: [any AnyLiveFeature] { nodesByID.values.map(\.feature) }
    func stack(_ id: String) -> StackNode? { stacksByID[id] }

    /// The session's full state, children included. With `keeping`, what is kept of the last
    /// encoding is used again, less what changed since (every feature marked and its owners up
    /// to the root), and this one is kept; without, nothing stays kept.
    func encodeState(keeping: Bool) -> JSON? {
        // A handful of features encode faster afresh than through what is kept of them.
        guard keeping, !changesWereDiscarded, nodeCount > Self.fewFeatures else {
            encodedStates.forgetAll()
            return root.feature.encodeState()
        }
        forgetEncodings(of: tracker.peek())
        return encodedStates.keeping { root.feature.encodeState() }
    }

    /// Drops what changed since the last reconciliation, unreconciled, and every kept encoding
    /// with it: for a rollback, which rebuilds the session or, failing that, keeps it as it is.
    /// The features that changed are not observed again, so from here on nothing is kept.
    func discardChanges() {
        _ = tracker.drain()
        encodedStates.forgetAll()
        changesWereDiscarded = true
    }

    private var changesWereDiscarded = false

    private static let fewFeatures = 4

    private func forgetEncodings(of serials: [Int]) {
        for serial in serials {
            var node = nodesBySerial[serial]
            while let current = node {
                encodedStates.forget(current.serial)
                node = current.parent
            }
        }
    }

    /// Re-derives every feature that changed since the last call and returns the batch.
    func reconcile() -> [(NavigationEvent.Kind, JSON)] {
        let serials = tracker.drain()
        forgetEncodings(of: serials)
        if serials.count == 1 || serials.count == 2 && serials[0] == serials[1] {
            // The usual transaction: one feature changed (once or twice).
            if let node = nodesBySerial[serials[0]], node.isAttached { update(node) }
        } else if !serials.isEmpty {
            var seen = Set<Int>()
            let dirty = serials.compactMap { serial in seen.insert(serial).inserted ? nodesBySerial[serial] : nil }
            // Owners first: an owner that removes a child spares the child a pointless update.
            for node in dirty.sorted(by: { $0.depth < $1.depth }) where node.isAttached {
                update(node)
            }
        }
        clientRemovals.removeAll()
        return takeBatch()
    }

    /// Feature instances on screen.
    var nodeCount: Int { nodesByID.count }

    /// The bytes of every `state` on screen as compact JSON: the session's size as its clients
    /// hold it, kept up to date with each node that changes.
    private(set) var stateBytes = 0

    /// How many features are on screen at each depth (the root alone at 0).
    private var countByDepth: [Int] = []

    /// The depth of the deepest feature on screen.
    var deepest: Int { countByDepth.lastIndex { $0 > 0 } ?? 0 }

    /// The longest stack on screen.
    var longestStack: Int { stacksByID.values.reduce(0) { max($0, $1.elements.count) } }

    /// Measures what the next `reconcile` would put on screen, without changing anything, so a
    /// transaction that would grow the tree past `limits` can be refused before it is committed.
    /// New presentations and elements count one node each; their own children are not derived.
    /// `carriedBytes` is the size of what the request brought (arguments, a value, a state).
    func prospectiveViolation(of limits: SessionLimits, carriedBytes: Int) -> String? {
        var added = 0
        var seen = Set<Int>()
        for serial in tracker.peek() where seen.insert(serial).inserted {
            guard let node = nodesBySerial[serial], node.isAttached, let derivation = node.feature.derive() else { continue }
            let grows = zip(node.stacks, derivation.stacks).contains { $1.count > $0.elements.count }
                || derivation.presentations.count > node.presentations.count
            if grows && node.depth + 1 >= limits.maxDepth {
                return "features would nest deeper than this server's limit of \(limits.maxDepth)"
            }
            for (stack, contents) in zip(node.stacks, derivation.stacks) {
                if contents.count > limits.maxPathLength {
                    return "stack \(stack.id) would hold \(contents.count) elements, more than this server's limit of \(limits.maxPathLength)"
                }
                added += max(0, contents.count - stack.elements.count)
            }
            added += max(0, derivation.presentations.count - node.presentations.count)
        }
        // Only growth is refused: a session over the bound (made under a larger one, or grown by
        // an effect's late change) may still change what it shows.
        guard added == 0 || nodesByID.count + added <= limits.maxNodes else {
            return "the session would show more than this server's limit of \(limits.maxNodes) features"
        }
        if (stateBytes + carriedBytes) * 2 >= limits.maxStateBytes {
            let bytes = prospectiveStateBytes()
            if bytes > limits.maxStateBytes && bytes > stateBytes {
                return "the session's state would take \(bytes) bytes, more than this server's limit of \(limits.maxStateBytes)"
            }
        }
        return nil
    }

    /// What `stateBytes` would be after the next `reconcile`, new features included, so a change
    /// that grows some state and removes other state is judged by what remains. Only what
    /// changed is derived afresh: a feature that did not change has the same state and children,
    /// whose bytes are already counted, and one that did keeps on screen what `reconcile` would
    /// keep (rules 1 and 6), measured the same way; only what it newly shows is derived whole.
    /// Derived whole, a tree near the bound made every small change cost a walk of megabytes.
    func prospectiveStateBytes() -> Int {
        prospectiveStateBytes(of: root, changed: Set(tracker.peek()))
    }

    /// A feature on screen: as it stands, unless it changed.
    private func prospectiveStateBytes(of node: Node, changed: Set<Int>) -> Int {
        guard changed.contains(node.serial) else {
            var bytes = node.stateBytes
            for child in node.presentations { bytes += prospectiveStateBytes(of: child, changed: changed) }
            for stack in node.stacks { for element in stack.elements { bytes += prospectiveStateBytes(of: element, changed: changed) } }
            return bytes
        }
        return prospectiveStateBytes(of: node.feature, keeping: node, changed: changed)
    }

    /// A feature derived afresh: of what `node` shows, what `reconcile` would keep counts as it
    /// stands; what is new (all of it, without a node) is derived whole.
    private func prospectiveStateBytes(of feature: any AnyLiveFeature, keeping node: Node?, changed: Set<Int>) -> Int {
        guard let derivation = feature.derive() else { return 0 }
        var bytes = JSONWriter.size(derivation.state)
        for (slot, child) in derivation.presentations {
            if let kept = node?.presentations.first(where: { $0.isAttached && isSame($0, slot: slot, child: child) }) {
                bytes += prospectiveStateBytes(of: kept, changed: changed)
            } else {
                bytes += prospectiveStateBytes(of: child.makeFeature(), keeping: nil, changed: changed)
            }
        }
        for (index, contents) in derivation.stacks.enumerated() {
            var prefix = 0
            if let stack = node.flatMap({ index < $0.stacks.count ? $0.stacks[index] : nil }) {
                prefix = min(stack.fingerprint.commonPrefix(with: contents.fingerprint()), stack.elements.count)
                for element in stack.elements[..<prefix] { bytes += prospectiveStateBytes(of: element, changed: changed) }
            }
            for index in prefix..<contents.count { bytes += prospectiveStateBytes(of: contents.makeFeature(index), keeping: nil, changed: changed) }
        }
        return bytes
    }

    /// Marks a subtree the client is about to remove, so its events carry `origin: client`.
    func markRemovedByClient(_ node: Node) {
        clientRemovals.insert(node.serial)
        for child in node.presentations { markRemovedByClient(child) }
        for stack in node.stacks { for element in stack.elements { markRemovedByClient(element) } }
    }

    func cancelClientRemovals() { clientRemovals.removeAll() }

    // MARK: - Deriving

    private func observe(_ node: Node) -> Derivation? {
        let serial = node.serial
        let tracker = tracker
        return withObservationTracking {
            node.feature.derive()
        } onChange: {
            tracker.markDirty(serial)
        }
    }

    /// Fills a new node from its derivation and adds its subtree, parents before children.
    /// When restoring, ids come from the stored node in the same place instead of the counter.
    private func build(_ node: Node, restoring stored: JSON?) {
        guard let derivation = observe(node) else { return }
        node.state = derivation.state
        stateBytes += node.stateBytes
        let storedStacks = stored?["stacks"]?.arrayValue ?? []
        node.stacks = derivation.stacks.indices.map { index in
            let name = node.feature.stackName(index)
            let stored = storedStacks.first { $0["slot"]?.stringValue == name }?["id"]?.stringValue
            let id = stored.map { noteRestored($0); return $0 } ?? makeID("s")
            let stack = StackNode(id: id, slot: index, name: name, owner: node)
            stacksByID[stack.id] = stack
            return stack
        }
        announce(node)
        let storedPresentations = stored?["presentations"]?.arrayValue ?? []
        for (slot, child) in derivation.presentations {
            let name = node.feature.presentationSlot(slot).name
            let match = storedPresentations.first { $0["slot"]?.stringValue == name }
            node.presentations.append(present(child, slot: slot, in: node, restoring: match))
        }
        if !storedPresentations.isEmpty {
            // Presentations stay in the order they appeared, as clients hold them.
            let order = storedPresentations.compactMap { $0["id"]?.stringValue }
            node.presentations.sort { (order.firstIndex(of: $0.id) ?? .max) < (order.firstIndex(of: $1.id) ?? .max) }
        }
        for (stack, contents) in zip(node.stacks, derivation.stacks) {
            let storedElements = storedStacks.first { $0["id"]?.stringValue == stack.id }?["elements"]?.arrayValue ?? []
            for index in 0..<contents.count {
                pushElement(contents.makeFeature(index), onto: stack, restoring: storedElements.indices.contains(index) ? storedElements[index] : nil)
            }
            stack.fingerprint = contents.fingerprint()
        }
    }

    /// The serial of a stored id (`p12` → 12), or a fresh one.
    private func serial(restoring stored: JSON?) -> Int {
        guard let id = stored?["id"]?.stringValue, let serial = Int(id.dropFirst()), serial > 0 else { return makeSerial() }
        noteRestored(id)
        return serial
    }

    /// Keeps the highest number of the ids a restore took from the stored tree: every one must be
    /// under the stored counter, or a new id could repeat one on screen.
    private func noteRestored(_ id: String) {
        highestRestoredSerial = max(highestRestoredSerial, Int(id.dropFirst()) ?? 0)
    }

    private func announce(_ node: Node) {
        switch node.placement {
        case .root:
            break
        case .presented(let slot, _, let alert):
            let declared = node.parent?.feature.presentationSlot(slot)
            var data = JSONObject()
            data.append("id", .string(node.id))
            data.append("parent", .string(node.parent?.id ?? ""))
            data.append("slot", .string(declared?.name ?? ""))
            data.append("style", .string(declared?.style.rawValue ?? ""))
            data.append("feature", .string(node.feature.screenName))
            data.append("state", .object(node.state))
            data.append("stacks", node.emptyStacksJSON)
            if let alert { data.append("alert", alert.json) }
            if let anchor = declared?.anchor { data.append("anchor", .string(anchor)) }
            additions.append((.present, .object(data)))
        case .element(let membership):
            let stack = membership.stack
            additions.append((.push, .object(JSONObject([
                ("stack", .string(stack.id)),
                ("id", .string(node.id)),
                ("index", .int(stack.elements.count - 1)),
                ("feature", .string(node.feature.screenName)),
                ("state", .object(node.state)),
                ("stacks", node.emptyStacksJSON),
            ]))))
        }
    }

    private func present(_ child: PresentedChild, slot: Int, in owner: Node, restoring stored: JSON? = nil) -> Node {
        let serial = serial(restoring: stored)
        let node = Node(
            id: "p\(serial)", serial: serial, feature: child.makeFeature(), parent: owner,
            placement: .presented(slot: slot, identity: child.identity, alert: child.alert)
        )
        register(node)
        build(node, restoring: stored)
        return node
    }

    private func pushElement(_ feature: any AnyLiveFeature, onto stack: StackNode, restoring stored: JSON? = nil) {
        let serial = serial(restoring: stored)
        let node = Node(id: "e\(serial)", serial: serial, feature: feature, parent: stack.owner, placement: .element(Node.Membership(stack: stack)))
        register(node)
        stack.elements.append(node)
        build(node, restoring: stored)
    }

    // MARK: - Diffing

    private func update(_ node: Node) {
        // A feature that is gone is removed by its owner, which changed too and came first.
        guard let derivation = observe(node) else { return }

        var changed = JSONObject()
        for pair in derivation.state.pairs where node.state[pair.key] != pair.value {
            changed.append(pair.key, pair.value)
        }
        if !changed.isEmpty {
            stateBytes -= node.stateBytes
            node.state = derivation.state
            stateBytes += node.stateBytes
            var data = JSONObject()
            data.reserveCapacity(2)
            data.append("feature", .string(node.id))
            data.append("changes", .object(changed))
            changes.append((.state, .object(data)))
        }

        for existing in node.presentations
        where !derivation.presentations.contains(where: { isSame(existing, slot: $0.slot, child: $0.child) }) {
            removing(existing) { dismiss(existing) }
        }
        // Presentations stay in the order they appeared, as a client that appends them holds them.
        node.presentations.removeAll { !$0.isAttached }
        for (slot, child) in derivation.presentations
        where !node.presentations.contains(where: { isSame($0, slot: slot, child: child) }) {
            node.presentations.append(present(child, slot: slot, in: node))
        }

        // Rule 6: keep the longest common prefix, pop the rest, push the new tail.
        for (stack, contents) in zip(node.stacks, derivation.stacks) {
            let fingerprint = contents.fingerprint()
            let prefix = min(stack.fingerprint.commonPrefix(with: fingerprint), stack.elements.count)
            if prefix < stack.elements.count { removing(stack.elements[prefix]) { pop(stack, from: prefix) } }
            for index in prefix..<contents.count { pushElement(contents.makeFeature(index), onto: stack) }
            stack.fingerprint = fingerprint
        }
    }

    /// Rule 1: a presentation is keyed by (owner, slot, identity). An alert's text is part of
    /// what is on screen and no event edits it in place, so new text is a new alert.
    private func isSame(_ existing: Node, slot: Int, child: PresentedChild) -> Bool {
        guard case .presented(let existingSlot, let identity, let alert) = existing.placement else { return false }
        return existingSlot == slot && identity == child.identity && alert == child.alert
    }

    /// Whether the next `reconcile` would keep every screen as it is, only their states changed:
    /// no presentation or stack element replaced, added or removed.
    func keepsEveryScreen() -> Bool {
        var seen = Set<Int>()
        for serial in tracker.peek() where seen.insert(serial).inserted {
            guard let node = nodesBySerial[serial], node.isAttached else { continue }
            guard let derivation = node.feature.derive(), derivation.presentations.count == node.presentations.count else { return false }
            for (slot, child) in derivation.presentations where !node.presentations.contains(where: { isSame($0, slot: slot, child: child) }) {
                return false
            }
            for (stack, contents) in zip(node.stacks, derivation.stacks)
            where contents.count != stack.elements.count || stack.fingerprint.commonPrefix(with: contents.fingerprint()) != contents.count {
                return false
            }
        }
        return true
    }

    /// Collects the removals of one subtree, to be listed at its place in the tree.
    private func removing(_ root: Node, _ body: () -> Void) {
        let position = TreePosition(root)
        body()
        removalGroups.append((position, removals))
        removals.removeAll()
    }

    private func dismiss(_ node: Node) {
        removeDescendants(of: node)
        removals.append((.dismiss, .object(JSONObject([("id", .string(node.id)), ("origin", .string(origin(of: node).rawValue))]))))
        detach(node)
    }

    /// Removes what a feature shows before the feature itself goes (deepest first); what it shows
    /// side by side goes in tree order.
    private func removeDescendants(of node: Node) {
        for child in node.presentations { dismiss(child) }
        for stack in node.stacks where !stack.elements.isEmpty {
            pop(stack, from: 0)
        }
    }

    private func pop(_ stack: StackNode, from index: Int) {
        let popped = Array(stack.elements[index...].reversed())
        for element in popped { removeDescendants(of: element) }
        removals.append((.pop, .object(JSONObject([
            ("stack", .string(stack.id)),
            ("ids", .array(popped.map { .string($0.id) })),
            ("origin", .string(popped.first.map(origin(of:))?.rawValue ?? Origin.server.rawValue)),
        ]))))
        for element in popped { detach(element) }
        stack.elements.removeSubrange(index...)
    }

    private func origin(of node: Node) -> Origin {
        clientRemovals.contains(node.serial) ? .client : .server
    }

    // MARK: - Bookkeeping

    private func makeSerial() -> Int {
        defer { nextSerial += 1 }
        return nextSerial
    }

    /// Ids are never reused within a session: one counter serves every kind.
    private func makeID(_ prefix: String) -> String {
        prefix + String(makeSerial())
    }

    private func register(_ node: Node) {
        while countByDepth.count <= node.depth { countByDepth.append(0) }
        countByDepth[node.depth] += 1
        nodesBySerial[node.serial] = node
        nodesByID[node.id] = node
        if let key = node.feature.encodedStateKey {
            var owner = node.parent
            while let current = owner, current.feature.encodedStateKey == nil { owner = current.parent }
            encodedStates.register(key, serial: node.serial, enclosing: owner?.serial)
        }
    }

    private func detach(_ node: Node) {
        countByDepth[node.depth] -= 1
        stateBytes -= node.stateBytes
        node.isAttached = false
        nodesBySerial[node.serial] = nil
        nodesByID[node.id] = nil
        for stack in node.stacks { stacksByID[stack.id] = nil }
        if let key = node.feature.encodedStateKey { encodedStates.remove(key, serial: node.serial) }
    }

    private func takeBatch() -> [(NavigationEvent.Kind, JSON)] {
        defer {
            removalGroups.removeAll()
            additions.removeAll()
            changes.removeAll()
        }
        // A batch of `state` changes alone, the usual one, is handed over as it is.
        if removalGroups.isEmpty && additions.isEmpty { return changes }
        if removalGroups.count > 1 { removalGroups.sort { $0.position < $1.position } }
        return removalGroups.flatMap(\.events) + additions + changes
    }
}

/// Where a node sits in the tree, comparable in tree order: an owner before what it shows, its
/// presentations before its stacks, each in the order they appeared. Serials only grow, so a
/// position stays valid while siblings come and go within one reconciliation.
struct TreePosition: Comparable {
    private var steps: [Int] = []

    init(_ node: Node) {
        var current: Node? = node
        while let step = current, let parent = step.parent {
            switch step.placement {
            case .root: break
            case .presented: steps.append(step.serial); steps.append(0)
            case .element(let membership): steps.append(step.serial); steps.append(1 + membership.stack.slot)
            }
            current = parent
        }
        steps.reverse()
    }

    static func < (lhs: TreePosition, rhs: TreePosition) -> Bool {
        lhs.steps.lexicographicallyPrecedes(rhs.steps)
    }
}
