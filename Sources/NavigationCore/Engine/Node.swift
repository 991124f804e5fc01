/// One feature instance in the tree the reconciler last emitted: what every client holds.
final class Node {
    enum Placement {
        case root
        case presented(slot: Int, identity: Identity, alert: PresentedAlert?)
        case element(Membership)
    }

    /// An element's stack, held unowned: the stack owns its elements, not the reverse.
    struct Membership {
        unowned let stack: StackNode
    }

    let id: String
    let serial: Int
    let feature: any AnyLiveFeature
    private(set) weak var parent: Node?
    let depth: Int
    let placement: Placement
    var state = JSONObject() {
        didSet { stateBytes = JSONWriter.size(state) }
    }
    /// `state`'s size as compact JSON, kept so the session's total is a sum, not a walk.
    private(set) var stateBytes = 2
    var presentations: [Node] = []
    var stacks: [StackNode] = []
    var isAttached = true

    init(id: String, serial: Int, feature: any AnyLiveFeature, parent: Node?, placement: Placement) {
        self.id = id
        self.serial = serial
        self.feature = feature
        self.parent = parent
        self.depth = (parent?.depth ?? -1) + 1
        self.placement = placement
    }

    /// The `stacks` a `present` or `push` event carries: the new feature's stacks, still empty.
    var emptyStacksJSON: JSON {
        .array(stacks.map { stack in
            .object(JSONObject([("id", .string(stack.id)), ("slot", .string(stack.name)), ("elements", .array([]))]))
        })
    }

    /// The subtree as `GET …/navigation` and `snapshot` show it.
    var json: JSON {
        var object = JSONObject()
        object.append("id", .string(id))
        if case .presented(let slot, _, let alert) = placement {
            let declared = parent?.feature.presentationSlot(slot)
            object.append("slot", .string(declared?.name ?? ""))
            object.append("style", .string(declared?.style.rawValue ?? ""))
            if let alert { object.append("alert", alert.json) }
            if let anchor = declared?.anchor { object.append("anchor", .string(anchor)) }
        }
        object.append("feature", .string(feature.screenName))
        object.append("state", .object(state))
        object.append("presentations", .array(presentations.map(\.json)))
        object.append("stacks", .array(stacks.map(\.json)))
        return .object(object)
    }
}

/// A navigation stack in the emitted tree.
final class StackNode {
    let id: String
    let slot: Int
    let name: String
    unowned let owner: Node
    var elements: [Node] = []
    /// The elements as last derived, to diff the next derivation against.
    var fingerprint = ElementFingerprint()

    init(id: String, slot: Int, name: String, owner: Node) {
        self.id = id
        self.slot = slot
        self.name = name
        self.owner = owner
    }

    var json: JSON {
        .object(JSONObject([("id", .string(id)), ("slot", .string(name)), ("elements", .array(elements.map(\.json)))]))
    }
}
