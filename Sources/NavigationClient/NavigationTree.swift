/// The rules for applying events to a tree, apart from any connection: a tree built from a
/// `snapshot` and the events after it equals `GET …/navigation` (API.md, invariant 8).
/// Strict: an event that does not fit throws and leaves the tree as it was.
public enum NavigationTree {
    /// The deepest a feature may sit (the root is 1): about what a snapshot's JSON can hold, and
    /// far more than navd's screens nest (its states nest at most 64 levels, a few per feature).
    /// The tree is walked by recursion, so a stream that nested presentations without end would
    /// otherwise exhaust the stack.
    public static let maxDepth = 250

    /// Applies one event to `tree` (a `snapshot` replaces it); throws, leaving it as it was,
    /// when the event does not fit.
    public static func apply(_ event: NavigationEvent, to tree: inout NavigationNode?) throws(MirrorError) {
        if case .snapshot(_, let navigation) = event {
            guard navigation.height <= maxDepth else { throw MirrorError(description: "snapshot deeper than \(maxDepth) features") }
            try requireUnique(navigation)
            tree = navigation
            return
        }
        if case .end = event { return }
        guard var root = tree else { throw MirrorError(description: "an event before the first snapshot") }
        try apply(event, to: &root)
        tree = root
    }

    private static func apply(_ event: NavigationEvent, to root: inout NavigationNode) throws(MirrorError) {
        switch event {
        case .snapshot, .end:
            return
        case .present(let present):
            try requireNew(present.id, stacks: present.stacks.map(\.id), in: root)
            guard (root.depth(ofFirst: { $0.id == present.parent }) ?? 0) < maxDepth else {
                throw MirrorError(description: "present \(present.id): deeper than \(maxDepth) features")
            }
            let node = NavigationNode(id: present.id, feature: present.feature, slot: present.slot, style: present.style,
                                      alert: present.alert, anchor: present.anchor, state: present.state,
                                      stacks: present.stacks.map { NavigationStack(id: $0.id, slot: $0.slot) })
            guard try root.modify(present.parent, { parent throws(MirrorError) in parent.presentations.append(node) }) else {
                throw MirrorError(description: "present \(present.id): unknown parent \(present.parent)")
            }
        case .dismiss(let id, _):
            var removed = false
            try removePresentation(id, from: &root, removed: &removed)
            if !removed { throw MirrorError(description: "dismiss: \(id) is not presented") }
        case .push(let push):
            try requireNew(push.id, stacks: push.stacks.map(\.id), in: root)
            guard (root.depth(ofFirst: { $0.stacks.contains { $0.id == push.stack } }) ?? 0) < maxDepth else {
                throw MirrorError(description: "push \(push.id): deeper than \(maxDepth) features")
            }
            let node = NavigationNode(id: push.id, feature: push.feature, state: push.state,
                                      stacks: push.stacks.map { NavigationStack(id: $0.id, slot: $0.slot) })
            guard try root.modifyStack(push.stack, { stack throws(MirrorError) in
                guard push.index == stack.elements.count else {
                    throw MirrorError(description: "push \(push.id): index \(push.index) is not the top of \(push.stack)")
                }
                stack.elements.append(node)
            }) else { throw MirrorError(description: "push \(push.id): unknown stack \(push.stack)") }
        case .pop(let stackID, let ids, _):
            guard try root.modifyStack(stackID, { stack throws(MirrorError) in
                let top = Array(stack.elements.suffix(ids.count).reversed())
                guard ids.count <= stack.elements.count, top.map(\.id) == ids else {
                    throw MirrorError(description: "pop: \(ids) are not the top of \(stackID)")
                }
                guard top.allSatisfy(\.isBare) else { throw MirrorError(description: "pop of \(ids) before their own presentations and stacks") }
                stack.elements.removeLast(ids.count)
            }) else { throw MirrorError(description: "pop: unknown stack \(stackID)") }
        case .state(let feature, let changes):
            guard try root.modify(feature, { node throws(MirrorError) in node.state.merge(changes) { _, new in new } }) else {
                throw MirrorError(description: "state: unknown feature \(feature)")
            }
        }
    }

    private static func removePresentation(_ id: String, from node: inout NavigationNode, removed: inout Bool) throws(MirrorError) {
        if let index = node.presentations.firstIndex(where: { $0.id == id }) {
            guard node.presentations[index].isBare else { throw MirrorError(description: "dismiss of \(id) before its own presentations and stacks") }
            node.presentations.remove(at: index)
            removed = true
            return
        }
        for index in node.presentations.indices where !removed { try removePresentation(id, from: &node.presentations[index], removed: &removed) }
        for stack in node.stacks.indices where !removed {
            for index in node.stacks[stack].elements.indices where !removed {
                try removePresentation(id, from: &node.stacks[stack].elements[index], removed: &removed)
            }
        }
    }

    /// A new feature's id, and its stacks' ids, must not be on screen already: a `pop` or a
    /// `push` names a stack by id alone.
    private static func requireNew(_ id: String, stacks: [String], in root: NavigationNode) throws(MirrorError) {
        if root.find(id) != nil { throw MirrorError(description: "\(id) is already on screen") }
        let onScreen = Set(root.allStackIDs)
        if Set(stacks).count != stacks.count || stacks.contains(where: onScreen.contains) {
            throw MirrorError(description: "\(id) brings a stack id already on screen")
        }
    }

    private static func requireUnique(_ tree: NavigationNode) throws(MirrorError) {
        let ids = tree.allIDs, stacks = tree.allStackIDs
        if Set(ids).count != ids.count || Set(stacks).count != stacks.count {
            throw MirrorError(description: "snapshot with a repeated id")
        }
    }
}
