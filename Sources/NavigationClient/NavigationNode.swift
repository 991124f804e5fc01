/// How a presented feature appears on screen (API.md, "The navigation tree").
public enum PresentationStyle: String, Sendable, Hashable, Codable {
    /// One case per style the contract names.
    /// A modal alert with buttons.
    case alert
    /// A sheet of buttons from the bottom (an action sheet).
    case confirmationDialog
    /// A card over the owner, dismissed by a swipe down.
    case sheet
    /// A bubble pointing at a control (its `anchor`).
    case popover
    /// A modal screen covering everything.
    case fullScreenCover
    /// Pushed like a stack element, but driven by optional state.
    case drillDown
}

/// An alert's or confirmation dialog's content.
public struct AlertContent: Sendable, Hashable, Codable {
    /// A button the user can tap to dismiss the alert.
    public struct Button: Sendable, Hashable, Codable {
        /// How the button is drawn: a cancel button, or one that destroys something.
        public enum Role: String, Sendable, Hashable, Codable {
            /// Dismisses without doing anything.
            case cancel
            /// Destroys something (drawn in red).
            case destructive
        }
        /// What the client sends back as `{"button": id}` to dismiss with this button.
        public var id: String
        /// The text on the button.
        public var label: String
        /// Its role; nil for a plain button.
        public var role: Role?
    }
    /// The alert's title.
    public var title: String
    /// The text under the title, if any.
    public var message: String?
    /// The buttons, in order.
    public var buttons: [Button]
}

/// A navigation stack: its slot and its elements, bottom first.
public struct NavigationStack: Sendable, Hashable, Codable {
    /// The stack's id (`s1`), which `pop` names.
    public var id: String
    /// The owner's stack slot (`path`).
    public var slot: String
    /// The elements, bottom first.
    public var elements: [NavigationNode]

    /// A stack as the tree holds it; elements default to none (as `present` and `push` announce stacks).
    public init(id: String, slot: String, elements: [NavigationNode] = []) {
        self.id = id
        self.slot = slot
        self.elements = elements
    }

    /// Decodes a stack whose `elements` may be absent.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        slot = try container.decode(String.self, forKey: .slot)
        elements = try container.decodeIfPresent([NavigationNode].self, forKey: .elements) ?? []
    }
}

/// One feature instance on screen: the root, a presentation or a stack element. Presentation
/// fields (`slot`, `style`, `alert`, `anchor`) are nil for the root and for stack elements.
public struct NavigationNode: Sendable, Hashable, Codable, Identifiable {
    /// The instance id (`root`, `p4`, `e3`) actions, bindings and dismissals name.
    public var id: String
    /// The screen's name, as `GET /features` lists it.
    public var feature: String
    /// The owner's slot that presents it (`destination.fact`).
    public var slot: String?
    /// How it is presented.
    public var style: PresentationStyle?
    /// An alert's or dialog's content.
    public var alert: AlertContent?
    /// The control a popover points at.
    public var anchor: String?
    /// The feature's own fields; child features appear as `presentations` and `stacks`.
    public var state: [String: JSONValue]
    /// What this feature presents, in the order they appeared.
    public var presentations: [NavigationNode]
    /// This feature's navigation stacks.
    public var stacks: [NavigationStack]

    /// A node as the tree holds it; presentation fields default to nil, children to none.
    public init(id: String, feature: String, slot: String? = nil, style: PresentationStyle? = nil, alert: AlertContent? = nil,
                anchor: String? = nil, state: [String: JSONValue] = [:], presentations: [NavigationNode] = [], stacks: [NavigationStack] = []) {
        self.id = id
        self.feature = feature
        self.slot = slot
        self.style = style
        self.alert = alert
        self.anchor = anchor
        self.state = state
        self.presentations = presentations
        self.stacks = stacks
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        feature = try container.decode(String.self, forKey: .feature)
        slot = try container.decodeIfPresent(String.self, forKey: .slot)
        style = try container.decodeIfPresent(PresentationStyle.self, forKey: .style)
        alert = try container.decodeIfPresent(AlertContent.self, forKey: .alert)
        anchor = try container.decodeIfPresent(String.self, forKey: .anchor)
        state = try container.decodeIfPresent([String: JSONValue].self, forKey: .state) ?? [:]
        presentations = try container.decodeIfPresent([NavigationNode].self, forKey: .presentations) ?? []
        stacks = try container.decodeIfPresent([NavigationStack].self, forKey: .stacks) ?? []
    }

    /// The node with that id in this subtree.
    public func find(_ id: String) -> NavigationNode? {
        if self.id == id { return self }
        for child in presentations { if let found = child.find(id) { return found } }
        for stack in stacks { for element in stack.elements { if let found = element.find(id) { return found } } }
        return nil
    }

    /// Runs `body` on the node with that id in this subtree; false if there is none.
    mutating func modify(_ id: String, _ body: (inout NavigationNode) throws(MirrorError) -> Void) throws(MirrorError) -> Bool {
        if self.id == id { try body(&self); return true }
        for index in presentations.indices where try presentations[index].modify(id, body) { return true }
        for stack in stacks.indices {
            for index in stacks[stack].elements.indices where try stacks[stack].elements[index].modify(id, body) { return true }
        }
        return false
    }

    /// Runs `body` on the stack with that id and its owner; false if there is none.
    mutating func modifyStack(_ id: String, _ body: (inout NavigationStack) throws(MirrorError) -> Void) throws(MirrorError) -> Bool {
        for stack in stacks.indices where stacks[stack].id == id { try body(&stacks[stack]); return true }
        for index in presentations.indices where try presentations[index].modifyStack(id, body) { return true }
        for stack in stacks.indices {
            for index in stacks[stack].elements.indices where try stacks[stack].elements[index].modifyStack(id, body) { return true }
        }
        return false
    }

    var isBare: Bool { presentations.isEmpty && stacks.allSatisfy(\.elements.isEmpty) }

    var allIDs: [String] {
        [id] + presentations.flatMap(\.allIDs) + stacks.flatMap { stack in stack.elements.flatMap(\.allIDs) }
    }

    var allStackIDs: [String] {
        stacks.map(\.id) + children.flatMap(\.allStackIDs)
    }

    /// Features in the deepest path from here down, this one included.
    var height: Int {
        1 + (children.map(\.height).max() ?? 0)
    }

    /// How deep the first node (in tree order) that `matches` sits below this one (this one is
    /// 1); nil if none here does.
    func depth(ofFirst matches: (NavigationNode) -> Bool) -> Int? {
        if matches(self) { return 1 }
        for child in children { if let depth = child.depth(ofFirst: matches) { return depth + 1 } }
        return nil
    }

    /// Presentations, then stack elements, in order.
    private var children: [NavigationNode] {
        presentations + stacks.flatMap(\.elements)
    }
}
