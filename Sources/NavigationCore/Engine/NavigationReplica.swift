/// A client's copy of the navigation tree, built from a snapshot and the events after it.
///
/// It is what any thin client does, written once. Recovery replays a durable session's
/// journal through it, and tests check invariant 8 with it (a replica always equals the
/// server's tree); not public API, tests reach it with `@testable`. It is strict, so an event
/// out of rule 3's order (a feature dismissed before its own presentations, a pop of elements
/// that are not on top) is an error rather than a silent repair.
struct NavigationReplica {
    struct Inconsistency: Error, CustomStringConvertible {
        let description: String
    }

    private final class Feature {
        var id: String
        var attributes: JSONObject
        var state: JSONObject
        var presentations: [Feature] = []
        var stacks: [Stack] = []
        weak var owner: Feature?

        init(id: String, attributes: JSONObject, state: JSONObject) {
            self.id = id
            self.attributes = attributes
            self.state = state
        }
    }

    private final class Stack {
        let id: String
        let slot: String
        var elements: [Feature] = []
        init(id: String, slot: String) {
            self.id = id
            self.slot = slot
        }
    }

    private var root: Feature
    private var features: [String: Feature] = [:]
    private var stacks: [String: Stack] = [:]

    /// Starts from a `snapshot`'s `navigation` (or `GET …/navigation`).
    init(navigation: JSON) throws(Inconsistency) {
        root = Feature(id: "root", attributes: JSONObject(), state: JSONObject())
        try load(navigation)
    }

    /// The tree, in the shape `GET …/navigation` has.
    var navigation: JSON { render(root, kind: .root) }

    mutating func apply(event: String, data: JSON) throws(Inconsistency) {
        switch event {
        case "snapshot":
            guard let navigation = data["navigation"] else { throw fail("snapshot without navigation") }
            try load(navigation)
        case "present":
            guard let parent = data["parent"]?.stringValue.flatMap({ features[$0] }) else { throw fail("present: unknown parent in \(data.text)") }
            let feature = try make(data, nodeKeys: ["id", "parent", "state", "stacks"])
            feature.owner = parent
            parent.presentations.append(feature)
        case "dismiss":
            guard let id = data["id"]?.stringValue, let feature = features[id], let owner = feature.owner,
                  let index = owner.presentations.firstIndex(where: { $0 === feature }) else {
                throw fail("dismiss: \(data["id"]?.text ?? "?") is not presented")
            }
            try requireEmpty(feature, "dismiss")
            owner.presentations.remove(at: index)
            forget(feature)
        case "push":
            guard let stack = data["stack"]?.stringValue.flatMap({ stacks[$0] }) else { throw fail("push: unknown stack") }
            guard data["index"]?.intValue == stack.elements.count else { throw fail("push: index \(data["index"]?.text ?? "?") is not the top of \(stack.id)") }
            let feature = try make(data, nodeKeys: ["id", "stack", "index", "state", "stacks"])
            feature.owner = features.values.first { $0.stacks.contains { $0 === stack } }
            stack.elements.append(feature)
        case "pop":
            guard let stack = data["stack"]?.stringValue.flatMap({ stacks[$0] }),
                  let ids = data["ids"]?.arrayValue?.compactMap(\.stringValue) else { throw fail("pop: unknown stack") }
            let top = stack.elements.suffix(ids.count).reversed().map(\.id)
            guard top == ids else { throw fail("pop: \(ids) are not the top of \(stack.id) (\(top))") }
            for element in stack.elements.suffix(ids.count) {
                try requireEmpty(element, "pop")
                forget(element)
            }
            stack.elements.removeLast(ids.count)
        case "state":
            guard let feature = data["feature"]?.stringValue.flatMap({ features[$0] }),
                  let changes = data["changes"]?.objectValue else { throw fail("state: unknown feature in \(data.text)") }
            for pair in changes.pairs { feature.state[pair.key] = pair.value }
        case "end":
            break
        default:
            throw fail("unknown event \(event)")
        }
    }

    /// A tree with its ids and sibling order taken out, for comparing sessions whose ids differ
    /// (a warm deep link against a cold one).
    static func shape(of navigation: JSON) -> JSON {
        guard case .object(let node) = navigation else { return navigation }
        var result = JSONObject()
        for pair in node.pairs where pair.key != "id" && pair.key != "parent" {
            switch pair.key {
            case "presentations":
                let children = (pair.value.arrayValue ?? []).map(shape(of:))
                result.append(pair.key, .array(children.sorted { ($0["slot"]?.text ?? "") < ($1["slot"]?.text ?? "") }))
            case "stacks":
                result.append(pair.key, .array((pair.value.arrayValue ?? []).map { stack in
                    .object(JSONObject([
                        ("slot", stack["slot"] ?? .null),
                        ("elements", .array((stack["elements"]?.arrayValue ?? []).map(shape(of:)))),
                    ]))
                }))
            default:
                result.append(pair.key, pair.value)
            }
        }
        return .object(result)
    }

    // MARK: - Building

    private mutating func load(_ navigation: JSON) throws(Inconsistency) {
        features = [:]
        stacks = [:]
        root = try build(navigation, owner: nil)
    }

    private mutating func build(_ json: JSON, owner: Feature?) throws(Inconsistency) -> Feature {
        let feature = try make(json, nodeKeys: ["id", "state", "stacks", "presentations"])
        feature.owner = owner
        for child in json["presentations"]?.arrayValue ?? [] {
            feature.presentations.append(try build(child, owner: feature))
        }
        for (stack, stackJSON) in zip(feature.stacks, json["stacks"]?.arrayValue ?? []) {
            for element in stackJSON["elements"]?.arrayValue ?? [] {
                stack.elements.append(try build(element, owner: feature))
            }
        }
        return feature
    }

    private mutating func make(_ json: JSON, nodeKeys: Set<String>) throws(Inconsistency) -> Feature {
        guard let id = json["id"]?.stringValue, let state = json["state"]?.objectValue else {
            throw fail("a feature needs an id and a state: \(json.text)")
        }
        guard features[id] == nil else { throw fail("\(id) is already on screen") }
        var attributes = JSONObject()
        for pair in json.objectValue?.pairs ?? [] where !nodeKeys.contains(pair.key) {
            attributes.append(pair.key, pair.value)
        }
        let feature = Feature(id: id, attributes: attributes, state: state)
        for stackJSON in json["stacks"]?.arrayValue ?? [] {
            guard let stackID = stackJSON["id"]?.stringValue, let slot = stackJSON["slot"]?.stringValue else {
                throw fail("a stack needs an id and a slot")
            }
            let stack = Stack(id: stackID, slot: slot)
            stacks[stackID] = stack
            feature.stacks.append(stack)
        }
        features[id] = feature
        return feature
    }

    private func requireEmpty(_ feature: Feature, _ event: String) throws(Inconsistency) {
        guard feature.presentations.isEmpty, feature.stacks.allSatisfy(\.elements.isEmpty) else {
            throw fail("\(event) of \(feature.id) before its own presentations and stacks (rule 3)")
        }
    }

    private mutating func forget(_ feature: Feature) {
        features[feature.id] = nil
        for stack in feature.stacks { stacks[stack.id] = nil }
    }

    private func fail(_ message: String) -> Inconsistency { Inconsistency(description: message) }

    // MARK: - Rendering

    private enum Kind { case root, presented, element }

    private func render(_ feature: Feature, kind: Kind) -> JSON {
        var object = JSONObject()
        object.append("id", .string(feature.id))
        for pair in feature.attributes.pairs { object.append(pair.key, pair.value) }
        object.append("state", .object(feature.state))
        object.append("presentations", .array(feature.presentations.map { render($0, kind: .presented) }))
        object.append("stacks", .array(feature.stacks.map { stack in
            .object(JSONObject([
                ("id", .string(stack.id)), ("slot", .string(stack.slot)),
                ("elements", .array(stack.elements.map { render($0, kind: .element) })),
            ]))
        }))
        return .object(object)
    }
}
