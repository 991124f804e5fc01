import Features
@testable import NavigationCore
import Testing
import TestSupport

/// Seeded random walks over app, wifi and gallery mixing actions, bindings, dismissals, pops,
/// pushes and deep links. After every step the replica built from the emitted events must equal
/// the server's tree (invariant 8), and now and then that tree must equal the one a fresh
/// session derives from the same state.
@Suite struct InvariantPropertyTests {
    @Test(arguments: [("app", UInt64(1)), ("wifi", 2), ("gallery", 3), ("app", 4), ("gallery", 5)])
    func replayedEventsAlwaysEqualTheTreeDerivedFromState(_ feature: String, _ seed: UInt64) async throws {
        var harness = try await Harness(feature)
        var random = SplitMix64(seed: seed)
        let features = harness.catalog.description["features"]?.arrayValue ?? []
        let steps = 3000
        for step in 0..<steps {
            do {
                try await Self.randomStep(harness, features: features, random: &random)
            } catch {
                // Refusals are part of the walk; they must leave nothing half-done.
                #expect(error.kind != .preconditionFailed)
            }
            try await harness.sync()
            // The size kept change by change is the size of the tree as it stands.
            let tree = await harness.tree()
            #expect(await harness.session.stateBytes == Self.nodes(in: tree).reduce(0) { $0 + JSONWriter.size($1.json["state"] ?? .null) })
            // What is kept between encodings of the state is what encoding it afresh gives.
            let encodings = await harness.session.stateEncodedBothWays()
            #expect(encodings.kept == encodings.fresh, "step \(step)")
            if step % 100 == 0 {
                let fresh = try harness.catalog.makeSession(feature: feature, state: await harness.state())
                #expect(NavigationReplica.shape(of: await fresh.navigation()) == NavigationReplica.shape(of: await harness.tree()))
            }
        }
        // The walk must have exercised the reconciler, not only bounced off refusals.
        #expect(harness.lastSequence > steps / 3, "\(harness.lastSequence) events in \(steps) steps")
        print("invariant walk \(feature) seed \(seed): \(harness.lastSequence) events in \(steps) steps")
    }

    static func randomStep(_ harness: Harness, features: [JSON], random: inout SplitMix64) async throws(NavigationError) {
        let session = harness.session
        let tree = await session.navigation()
        let nodes = Self.nodes(in: tree)
        let stacks = Self.stacks(in: tree)
        let node = nodes[random.next(below: nodes.count)]
        switch random.next(below: 10) {
        case 0...3:
            let actions = describe(node, in: features)?["actions"]?.arrayValue ?? []
            guard !actions.isEmpty else { return }
            let action = actions[random.next(below: actions.count)]
            var arguments = JSONObject()
            for parameter in action["arguments"]?.arrayValue ?? [] {
                let name = parameter["name"]?.stringValue ?? ""
                arguments.append(name, argument(named: name, &random))
            }
            let outcome = try await session.perform(target: node.id, action: action["name"]?.stringValue ?? "", arguments: .object(arguments))
            _ = await session.waitForEffects(of: outcome, timeout: .seconds(5))
        case 4:
            let bindings = describe(node, in: features)?["bindings"]?.arrayValue ?? []
            guard !bindings.isEmpty, let field = bindings[random.next(below: bindings.count)].stringValue else { return }
            let value: JSON
            if case .bool(let flag)? = node.json["state"]?[field] {
                value = .bool(!flag)
            } else {
                value = .string(["blob", "x", ""][random.next(below: 3)])
            }
            _ = try await session.bind(target: node.id, field: field, value: value)
        case 5, 6:
            let presented = nodes.filter { $0.json["slot"] != nil }
            guard !presented.isEmpty else { return }
            let target = presented[random.next(below: presented.count)]
            let buttons = target.json["alert"]?["buttons"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
            let button = buttons.isEmpty || random.next(below: 2) == 0 ? nil : buttons[random.next(below: buttons.count)]
            _ = try await session.dismiss(presentation: target.id, button: button)
        case 7:
            let nonEmpty = stacks.filter { !$0.1.isEmpty }
            guard !nonEmpty.isEmpty else { return }
            let (stack, elements) = nonEmpty[random.next(below: nonEmpty.count)]
            let request: NavigationSession.PopRequest = random.next(below: 2) == 0
                ? .count(1 + random.next(below: elements.count))
                : .to(elements[random.next(below: elements.count)])
            _ = try await session.pop(stack: stack, request)
        case 8:
            let values = [#"{"counter":{}}"#, #"{"settings":{"isOn":true}}"#, #"{"nope":{}}"#]
            _ = try await session.push(from: node.id, value: json(values[random.next(below: values.count)]))
        default:
            // A warm deep link to the state of the moment, or back to the defaults.
            let state = random.next(below: 2) == 0 ? await session.describe().state : json("{}")
            _ = try await session.replaceState(state)
        }
    }

    struct Node {
        let id: String
        let json: JSON
    }

    static func nodes(in tree: JSON) -> [Node] {
        var result = [Node(id: tree["id"]?.stringValue ?? "", json: tree)]
        for child in tree["presentations"]?.arrayValue ?? [] { result += nodes(in: child) }
        for stack in tree["stacks"]?.arrayValue ?? [] {
            for element in stack["elements"]?.arrayValue ?? [] { result += nodes(in: element) }
        }
        return result
    }

    static func stacks(in tree: JSON) -> [(String, [String])] {
        var result: [(String, [String])] = []
        for stack in tree["stacks"]?.arrayValue ?? [] {
            let elements = stack["elements"]?.arrayValue ?? []
            result.append((stack["id"]?.stringValue ?? "", elements.compactMap { $0["id"]?.stringValue }))
            for element in elements { result += stacks(in: element) }
        }
        for child in tree["presentations"]?.arrayValue ?? [] { result += stacks(in: child) }
        return result
    }

    static func describe(_ node: Node, in features: [JSON]) -> JSON? {
        features.first { $0["name"] == node.json["feature"] }
    }

    static func argument(named name: String, _ random: inout SplitMix64) -> JSON {
        switch name {
        case "network": .string(["n1", "n2", "n3", "n4", "n5", "zz"][random.next(below: 6)])
        case "style": .string(PresentationStyle.allCases[random.next(below: PresentationStyle.allCases.count)].rawValue)
        default: .null
        }
    }
}
