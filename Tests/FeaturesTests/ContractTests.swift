import Features
@testable import NavigationCore
import Testing

/// The points API.md and FEATURES.md state precisely, checked at the model level.
@Suite struct ContractTests {
    /// The ids a client must remove when the whole tree below the root goes: deepest first,
    /// side-by-side subtrees in tree order.
    private func removalOrder(below node: JSON) -> [JSON] {
        var ids: [JSON] = []
        for child in node["presentations"]?.arrayValue ?? [] {
            ids += removalOrder(below: child)
            ids.append(child["id"] ?? .null)
        }
        return ids
    }

    @Test func siblingPresentationsAreRemovedInTreeOrderEachDeepestFirst() async throws {
        var harness = try await Harness("gallery")
        _ = try await harness.session.perform(target: "root", action: "sheetAndPopoverButtonTapped", arguments: nil)
        _ = try await harness.session.perform(target: "root", action: "nestedButtonTapped", arguments: nil)
        let level1 = try #require(await harness.presentation("nested"))
        _ = try await harness.session.perform(target: level1, action: "presentChildButtonTapped", arguments: nil)
        _ = try await harness.session.perform(target: "root", action: "editTextButtonTapped", arguments: nil)
        try await harness.sync()
        let expected = removalOrder(below: await harness.tree())
        #expect(expected.count == 5)

        // Everything at its default but the number of items made, which would be a `state` event.
        let outcome = try await harness.session.replaceState(json(#"{"itemsMade":2}"#))
        #expect(outcome.events.kinds == Array(repeating: "dismiss", count: 5))
        #expect(outcome.events.filter { $0.kind == .dismiss }.map { $0.data["id"] } == expected)
        try await harness.sync()
    }

    @Test func removalsNoticedByDifferentFeaturesStillFollowTreeOrder() async throws {
        var harness = try await Harness("app", state: json(#"{"path":[{"counter":{"destination":{"fact":{"value":"x"}}}},{"settings":{}}]}"#))
        let (stack, ids) = await harness.elements()
        let fact = try #require(await harness.presentation("destination.fact", of: ids[0]))
        try await harness.sync()
        // The root pops the settings screen; the counter below it dismisses its sheet. The sheet
        // sits earlier in the tree, so it goes first.
        let outcome = try await harness.session.replaceState(json(#"{"path":[{"counter":{}}]}"#))
        #expect(outcome.events.kinds == ["dismiss", "pop"])
        #expect(outcome.events[0].data == json(#"{"id":"\#(fact)","origin":"server"}"#))
        #expect(outcome.events[1].data == json(#"{"stack":"\#(stack)","ids":["\#(ids[1])"],"origin":"server"}"#))
        #expect(await harness.elements().ids == [ids[0]])
        try await harness.sync()
    }

    @Test func theVersionCountsTransactionsThatEmitAndANoOpKeepsIt() async throws {
        var harness = try await Harness("app", state: json(#"{"path":[{"counter":{}},{"settings":{}}]}"#))
        let before = await harness.session.describe().version
        let (stack, ids) = await harness.elements()
        // Popping to the element already on top changes nothing.
        let noOp = try await harness.session.pop(stack: stack, .to(ids[1]))
        #expect(noOp.version == before)
        #expect(noOp.events.isEmpty)
        // One transaction with several events is one version.
        let several = try await harness.session.replaceState(json(#"{"path":[{"settings":{"isOn":true}}]}"#))
        #expect(several.events.count > 1)
        #expect(several.version == before + 1)
        // Writing the value a field already has is a no-op too.
        let same = try await harness.session.bind(target: await harness.elements().ids[0], field: "isOn", value: true)
        #expect(same.version == before + 1)
        #expect(same.events.isEmpty)
        try await harness.sync()
    }

    @Test func aWarmDeepLinkKeepsScreensWithTheSameSlotAndCaseOrStackPositionAndCase() async throws {
        var harness = try await Harness("app", state: json(#"{"path":[{"counter":{"destination":{"settings":{}}}},{"settings":{}},{"counter":{}}]}"#))
        let (stack, ids) = await harness.elements()
        let settings = try #require(await harness.presentation("destination.settings", of: ids[0]))
        try await harness.sync()
        // Same case at position 0 (kept, its sheet too), another case at 1 (replaced), 2 gone.
        let outcome = try await harness.session.replaceState(json(#"{"path":[{"counter":{"count":5,"destination":{"settings":{"isOn":true}}}},{"counter":{}}]}"#))
        #expect(outcome.events.kinds == ["pop", "push", "state", "state"])
        #expect(outcome.events[0].data["ids"] == .array([.string(ids[2]), .string(ids[1])]))
        let after = await harness.elements()
        #expect(after.stack == stack)
        #expect(after.ids.first == ids[0])
        #expect(after.ids.count == 2 && after.ids[1] != ids[1])
        #expect(await harness.presentation("destination.settings", of: ids[0]) == settings)
        try await harness.sync()
    }

    @Test func forgettingAnyNetworkClearsTheSelection() async throws {
        var wifi = try await Harness("wifi", state: json(#"{"selectedNetworkID":"n2"}"#))
        // The detail of another network than the selected one.
        _ = try await wifi.session.perform(target: "root", action: "infoButtonTapped", arguments: ["network": "n3"])
        let detail = try #require(await wifi.presentation("destination.detail"))
        _ = try await wifi.session.perform(target: detail, action: "forgetNetworkButtonTapped", arguments: nil)
        let forget = try #require(await wifi.presentation("forgetAlertIsPresented", of: detail))
        let outcome = try await wifi.session.dismiss(presentation: forget, button: "forget")
        #expect(await wifi.state()["selectedNetworkID"] == .null)
        #expect(await wifi.presentation("destination.detail") == nil)
        #expect(outcome.events.last?.data == json(#"{"feature":"root","changes":{"selectedNetworkID":null}}"#))
        try await wifi.sync()
    }

    @Test func endSaysWhy() async throws {
        for reason in [NavigationSession.EndReason.deleted, .expired, .shutdown] {
            let harness = try await Harness("counter")
            await harness.session.end(reason)
            guard case .ended(let end) = await harness.session.attach(after: nil, { start, _ in start }) else {
                Issue.record("expected an ended session")
                continue
            }
            #expect(end.kind == .end)
            #expect(end.data == .object(JSONObject([("reason", .string(reason.rawValue))])))
        }
    }

    @Test func theCatalogListsEveryScreenThatCanAppear() throws {
        let catalog = FeatureSet.catalog(Harness.dependencies())
        let features = catalog.description["features"]?.arrayValue ?? []
        let listed = Set(features.compactMap { $0["name"]?.stringValue })
        var shown = Set<String>()
        for feature in features {
            for slot in feature["presentations"]?.arrayValue ?? [] { shown.insert(slot["feature"]?.stringValue ?? "") }
        }
        #expect(shown.isSubset(of: listed))
        #expect(listed.isSuperset(of: ["fact", "factFailure", "nested", "textEditor", "timedAlert", "alert", "connect", "detail"]))
        let hostable = Set(features.filter { $0["hostable"] == .bool(true) }.compactMap { $0["name"]?.stringValue })
        #expect(hostable == Set(catalog.hosts.map(\.name)))
    }
}

/// A session's size has bounds, and a request past them changes nothing.
@Suite struct SessionLimitTests {
    private static let limits = SessionLimits(maxPathLength: 4, maxNodes: 8, maxStringBytes: 16)

    private func session(_ feature: String, _ state: String) throws -> NavigationSession {
        try FeatureSet.catalog(Harness.dependencies()).makeSession(feature: feature, state: json(state), limits: Self.limits)
    }

    @Test func aDeepLinkPastALimitIsRefusedNamingThePath() throws {
        let five = #"{"path":[{"settings":{}},{"settings":{}},{"settings":{}},{"settings":{}},{"settings":{}}]}"#
        #expect(throws: NavigationError.tooLarge(StateError(JSONPath("state.path"), "5 items are more than this server's limit of 4"))) {
            try session("app", five)
        }
        #expect(throws: NavigationError.self) { try session("gallery", #"{"text":"seventeen bytes!!"}"#) }
        #expect(throws: Never.self) { try session("gallery", #"{"text":"sixteen bytes!!!"}"#) }
    }

    @Test func growthPastALimitIsUndoneAndChangesNothing() async throws {
        let session = try session("app", #"{"path":[{"settings":{}},{"settings":{}},{"counter":{}}]}"#)
        _ = try await session.perform(target: "root", action: "settingsButtonTapped", arguments: nil)
        let before = await session.describe()
        await #expect(throws: NavigationError.self) {
            try await session.perform(target: "root", action: "counterButtonTapped", arguments: nil)
        }
        await #expect(throws: NavigationError.self) {
            try await session.push(from: "root", value: json(#"{"settings":{}}"#))
        }
        let after = await session.describe()
        #expect(after.version == before.version)
        #expect(after.state == before.state)
        #expect(after.navigation == before.navigation)
        // Still usable, and shrinking is always allowed.
        let stack = try #require(after.navigation["stacks"]?[0]?["id"]?.stringValue)
        #expect(try await session.pop(stack: stack, .count(1)).events.count == 1)
        #expect(try await session.perform(target: "root", action: "counterButtonTapped", arguments: nil).events.count == 1)
    }

    /// Every document derived from a state nests deeper than the state; the depth bound keeps
    /// them readable, whether the nesting comes in a value or grows through actions.
    @Test func nestingPastTheDepthLimitIsRefusedAndChangesNothing() async throws {
        let limits = SessionLimits(maxDepth: 6)
        let catalog = FeatureSet.catalog(Harness.dependencies())
        func nested(_ levels: Int) -> JSON {
            var value = #"{"level":\#(levels)}"#
            for level in stride(from: levels - 1, through: 1, by: -1) { value = #"{"level":\#(level),"child":\#(value)}"# }
            return json(#"{"nested":\#(value)}"#)
        }
        // The state object is at depth 0, so five levels nest objects five deep: the most allowed.
        #expect(throws: Never.self) { try catalog.makeSession(feature: "gallery", state: nested(5), limits: limits) }
        #expect {
            try catalog.makeSession(feature: "gallery", state: nested(6), limits: limits)
        } throws: { error in
            guard case NavigationError.tooLarge(let refusal) = error else { return false }
            return refusal.path == JSONPath("state.nested.child.child.child.child.child") && refusal.description.contains("deeper")
        }
        let session = try catalog.makeSession(feature: "gallery", state: nested(4), limits: limits)
        await #expect(throws: NavigationError.self) { try await session.replaceState(nested(6)) }
        // Actions may nest one level more, down to depth 5, and no further.
        func deepest() async -> String? {
            var node = await session.navigation()
            var id: String?
            while let child = node["presentations"]?[0] {
                id = child["id"]?.stringValue
                node = child
            }
            return id
        }
        let fourth = try #require(await deepest())
        #expect(try await session.perform(target: fourth, action: "presentChildButtonTapped", arguments: nil).events.count > 0)
        let fifth = try #require(await deepest())
        let before = await session.describe()
        await #expect(throws: NavigationError.self) {
            try await session.perform(target: fifth, action: "presentChildButtonTapped", arguments: nil)
        }
        let after = await session.describe()
        #expect(after.version == before.version && after.state == before.state && after.navigation == before.navigation)
    }

    /// The state as a whole has a bound too, for what each dimension's bound lets through.
    @Test func theWholeStateIsBoundedInBytes() async throws {
        let catalog = FeatureSet.catalog(Harness.dependencies())
        let limits = SessionLimits(maxStateBytes: 2000)
        #expect {
            try catalog.makeSession(feature: "gallery", state: json(#"{"text":"\#(String(repeating: "x", count: 2500))"}"#), limits: limits)
        } throws: { error in
            guard case NavigationError.tooLarge(let refusal) = error else { return false }
            return refusal.description.contains("limit of 2000")
        }
        let session = try catalog.makeSession(feature: "gallery", state: json(#"{"text":""}"#), limits: limits)
        let unbounded = try catalog.makeSession(feature: "gallery", state: json(#"{"text":""}"#))
        let editor = try #require(await session.navigation()["presentations"]?[0]?["id"]?.stringValue)
        var refusals = 0
        for length in stride(from: 100, through: 3000, by: 100) {
            let text = JSON.string(String(repeating: "x", count: length))
            _ = try await unbounded.bind(target: editor, field: "text", value: text)
            let before = await session.describe()
            do {
                _ = try await session.bind(target: editor, field: "text", value: text)
                #expect(await session.stateBytes <= 2000)
            } catch {
                // Refused exactly when the state would have grown past the bound, and unchanged.
                guard case .tooLarge = error else { throw error }
                refusals += 1
                #expect(await unbounded.stateBytes > 2000)
                let after = await session.describe()
                #expect(after.version == before.version && after.state == before.state)
            }
        }
        #expect(refusals > 0 && refusals < 30)
        // Shrinking is always allowed.
        #expect(try await session.bind(target: editor, field: "text", value: .string("")).events.count == 1)
    }

    /// A deep link that leaves most of its state to defaults grows by more than it carries: it is
    /// measured all the same.
    @Test func aDeepLinkGrowingByItsDefaultsIsMeasured() async throws {
        let catalog = FeatureSet.catalog(Harness.dependencies())
        let session = try catalog.makeSession(feature: "wifi", state: json(#"{"foundNetworks":[]}"#), limits: SessionLimits(maxStateBytes: 20_000))
        let networks = (0..<700).map { #"{"id":"\#($0)"}"# }.joined(separator: ",")
        let link = json(#"{"foundNetworks":[\#(networks)]}"#)
        #expect(link.bytes.count < 10_000)
        await #expect(throws: NavigationError.self) { try await session.replaceState(link) }
        #expect(await session.describe().version == 0)
        #expect(await session.stateBytes <= 20_000)
    }

    /// New features count with their own state, whether a value or the feature's code adds them.
    @Test func featuresAddedPastTheByteBoundAreRefused() async throws {
        let catalog = FeatureSet.catalog(Harness.dependencies())
        let session = try catalog.makeSession(feature: "app", state: json("{}"), limits: SessionLimits(maxStateBytes: 1024))
        var refused = false
        for _ in 0..<100 where !refused {
            let before = await session.describe()
            do {
                _ = try await session.perform(target: "root", action: "counterButtonTapped", arguments: nil)
                #expect(await session.stateBytes <= 1024)
            } catch {
                guard case .tooLarge = error else { throw error }
                refused = true
                let after = await session.describe()
                #expect(after.version == before.version && after.navigation == before.navigation)
                // The counter it would have pushed is what crosses the bound.
                let grown = try catalog.makeSession(feature: "app", state: before.state)
                _ = try await grown.perform(target: "root", action: "counterButtonTapped", arguments: nil)
                #expect(await grown.stateBytes > 1024)
            }
        }
        #expect(refused)
        await #expect(throws: NavigationError.self) { try await session.push(from: "root", value: json(#"{"counter":{}}"#)) }
        let stack = try #require(await session.navigation()["stacks"]?[0]?["id"]?.stringValue)
        #expect(try await session.pop(stack: stack, .count(1)).events.count == 1)
    }

    /// A refused change leaves the same screens with the same ids, and publishes nothing, even
    /// when it had replaced a model a screen shows (another case, another element).
    @Test(arguments: [
        ("wifi", #"{"foundNetworks":[A,B],"destination":{"detail":{"network":A}}}"#, "networkTapped", #"{"network":"b"}"#),
        ("app", #"{"path":[{"counter":{}}]}"#, "", #"{"path":[{"settings":{}},{"counter":{"destination":{"fact":{"value":"BIG"}}}}]}"#),
    ])
    func aRefusalThatReplacedAModelLeavesTheSameScreens(_ feature: String, _ state: String, _ action: String, _ change: String) async throws {
        func expand(_ text: String) -> String {
            text.replacingOccurrences(of: "A", with: #"{"id":"a","name":"A","isSecured":false,"connectivity":0.5}"#)
                .replacingOccurrences(of: "B", with: #"{"id":"b","name":"\#(String(repeating: "b", count: 10_000))","isSecured":true,"connectivity":0.5}"#)
                .replacingOccurrences(of: "BIG", with: String(repeating: "f", count: 20_000))
        }
        let session = try FeatureSet.catalog(Harness.dependencies()).makeSession(feature: feature, state: json(expand(state)),
                                                                                 limits: SessionLimits(maxStateBytes: 20_000))
        let collector = EventCollector()
        await session.onEvents { collector.append($0) }
        let before = await session.describe()
        await #expect(throws: NavigationError.self) {
            if action.isEmpty {
                try await session.replaceState(json(expand(change)))
            } else {
                try await session.perform(target: "root", action: action, arguments: json(change))
            }
        }
        await session.flush()
        let after = await session.describe()
        #expect(after.version == before.version && after.state == before.state)
        #expect(after.navigation == before.navigation)
        #expect(collector.take().isEmpty)
    }

    /// An effect running in a model the refusal dropped is cancelled, and its feature settles
    /// as after a restart: no spinner is left up.
    @Test func anEffectInAModelARefusalDroppedSettles() async throws {
        let catalog = FeatureSet.catalog(Harness.dependencies(facts: SlowFacts()))
        let session = try catalog.makeSession(feature: "app", state: json(#"{"path":[{"counter":{}}]}"#), limits: SessionLimits(maxStateBytes: 20_000))
        let element = try #require(await session.navigation()["stacks"]?[0]?["elements"]?[0]?["id"]?.stringValue)
        _ = try await session.perform(target: element, action: "factButtonTapped", arguments: nil)
        let loading = await session.navigation()
        #expect(loading["stacks"]?[0]?["elements"]?[0]?["state"]?["factIsLoading"] == .bool(true))
        let huge = #"{"path":[{"settings":{}},{"counter":{"destination":{"fact":{"value":"\#(String(repeating: "f", count: 20_000))"}}}}]}"#
        await #expect(throws: NavigationError.self) { try await session.replaceState(json(huge)) }
        var settled = false
        for _ in 0..<50 where !settled {
            try await Task.sleep(for: .milliseconds(100))
            settled = await session.navigation()["stacks"]?[0]?["elements"]?[0]?["state"]?["factIsLoading"] == .bool(false)
        }
        #expect(settled)
        #expect(await session.navigation()["stacks"]?[0]?["elements"]?[0]?["id"]?.stringValue == element)
    }

    /// An effect's change that would take the state past the bound is dropped, as if the effect
    /// had been cancelled: no request to refuse, and the bound holds all the same.
    @Test func anEffectsResultPastTheBoundIsDropped() async throws {
        let facts = SizedFacts(delay: { _ in .milliseconds(10) }, size: { $0 == 0 ? 6000 : 100 })
        let catalog = FeatureSet.catalog(Harness.dependencies(facts: facts))
        let session = try catalog.makeSession(feature: "counter", state: json(#"{"count":0}"#), limits: SessionLimits(maxStateBytes: 5000))
        let collector = EventCollector()
        await session.onEvents { collector.append($0) }
        let started = try await session.perform(target: "root", action: "factButtonTapped", arguments: nil)
        _ = await session.waitForEffects(of: started, timeout: .seconds(5))
        var settled = false
        for _ in 0..<50 where !settled {
            try await Task.sleep(for: .milliseconds(100))
            settled = await session.navigation()["state"]?["factIsLoading"] == .bool(false)
        }
        #expect(settled)
        #expect(await session.navigation()["presentations"]?.arrayValue?.isEmpty == true)
        #expect(await session.stateBytes <= 5000)
        #expect(!collector.take().joined().contains { $0.kind == .present })
        // A fact that fits is shown as ever.
        _ = try await session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        let fits = try await session.perform(target: "root", action: "factButtonTapped", arguments: nil)
        let shown = await session.waitForEffects(of: fits, timeout: .seconds(5))
        #expect(shown.events.contains { $0.kind == .present })
    }

    /// Near the bound, a change is measured by what changed and what it brings, the rest of the
    /// tree counted as it stands: a screen deep in a long path presenting another is refused by
    /// exactly the bytes it would add, no more and no fewer.
    @Test func aChangeNearTheBoundIsMeasuredExactlyWithoutDerivingTheRest() async throws {
        let catalog = FeatureSet.catalog(Harness.dependencies())
        let fact = String(repeating: "f", count: 5000)
        let state = json(#"{"path":[{"counter":{"destination":{"fact":{"value":"\#(fact)"}}}},{"counter":{}},{"counter":{"count":3}}]}"#)
        func session(_ limit: Int) throws -> NavigationSession {
            try catalog.makeSession(feature: "app", state: state, limits: SessionLimits(maxStateBytes: limit))
        }
        let unbounded = try session(1 << 20)
        let before = await unbounded.stateBytes
        let element = try #require(await unbounded.navigation()["stacks"]?[0]?["elements"]?[2]?["id"]?.stringValue)
        _ = try await unbounded.perform(target: element, action: "settingsButtonTapped", arguments: nil)
        let added = await unbounded.stateBytes - before
        #expect(added > 0)

        let tight = try session(before + added - 1)
        await #expect(throws: NavigationError.self) { try await tight.perform(target: element, action: "settingsButtonTapped", arguments: nil) }
        #expect(await tight.stateBytes == before, "refused, and nothing of it kept")
        let exact = try session(before + added)
        _ = try await exact.perform(target: element, action: "settingsButtonTapped", arguments: nil)
        #expect(await exact.stateBytes == before + added)

        // A change of the root: the elements it keeps are counted as they stand, the new one derived.
        let grown = await unbounded.stateBytes
        _ = try await unbounded.perform(target: "root", action: "counterButtonTapped", arguments: nil)
        let pushed = await unbounded.stateBytes - grown
        #expect(pushed > 0)
        let tightRoot = try session(grown + pushed - 1)
        _ = try await tightRoot.perform(target: element, action: "settingsButtonTapped", arguments: nil)
        await #expect(throws: NavigationError.self) { try await tightRoot.perform(target: "root", action: "counterButtonTapped", arguments: nil) }
        #expect(await tightRoot.stateBytes == grown)
        let exactRoot = try session(grown + pushed)
        _ = try await exactRoot.perform(target: element, action: "settingsButtonTapped", arguments: nil)
        _ = try await exactRoot.perform(target: "root", action: "counterButtonTapped", arguments: nil)
        #expect(await exactRoot.stateBytes == grown + pushed)
    }

    /// A fact service whose facts take `delay` and are `size` bytes long, by number.
    struct SizedFacts: FactClient {
        let delay: @Sendable (Int) -> Duration
        let size: @Sendable (Int) -> Int

        func fact(about number: Int) async throws(FactError) -> String {
            try? await Task.sleep(for: delay(number))
            return String(repeating: "f", count: size(number))
        }
    }

    /// A refusal's models are observed again: an effect that finishes later is published on its
    /// own, without a request, and measured.
    @Test func anEffectFinishingAfterARefusalIsStillPublished() async throws {
        let facts = SizedFacts(delay: { _ in .milliseconds(300) }, size: { _ in 100 })
        let catalog = FeatureSet.catalog(Harness.dependencies(facts: facts))
        let session = try catalog.makeSession(feature: "counter", state: json(#"{"count":42}"#), limits: SessionLimits(maxStateBytes: 20_000))
        let collector = EventCollector()
        await session.onEvents { collector.append($0) }
        _ = try await session.perform(target: "root", action: "factButtonTapped", arguments: nil)
        let huge = #"{"count":42,"destination":{"fact":{"value":"\#(String(repeating: "z", count: 25_000))"}}}"#
        await #expect(throws: NavigationError.self) { try await session.replaceState(json(huge)) }
        var published: [NavigationEvent] = []
        for _ in 0..<30 where !published.contains(where: { $0.kind == .present }) {
            try await Task.sleep(for: .milliseconds(100))
            published += collector.take().joined()
        }
        #expect(published.contains { $0.kind == .present })
    }

    /// Dropping one effect's change leaves the others' alone: set back in place, the models an
    /// effect did not touch keep their effects.
    @Test func aDroppedEffectLeavesTheOthersRunning() async throws {
        let facts = SizedFacts(delay: { $0 == 30_000 ? .milliseconds(20) : .milliseconds(400) }, size: { $0 == 30_000 ? 25_000 : 100 })
        let catalog = FeatureSet.catalog(Harness.dependencies(facts: facts))
        let session = try catalog.makeSession(feature: "app", state: json(#"{"path":[{"counter":{"count":30000}},{"counter":{"count":50}}]}"#),
                                              limits: SessionLimits(maxStateBytes: 20_000))
        let elements = try #require(await session.navigation()["stacks"]?[0]?["elements"]?.arrayValue)
        for element in elements {
            _ = try await session.perform(target: element["id"]?.stringValue ?? "", action: "factButtonTapped", arguments: nil)
        }
        var tree = await session.navigation()
        for _ in 0..<40 where tree["stacks"]?[0]?["elements"]?[1]?["presentations"]?.arrayValue?.isEmpty != false
            || tree["stacks"]?[0]?["elements"]?[0]?["state"]?["factIsLoading"] != .bool(false) {
            try await Task.sleep(for: .milliseconds(100))
            tree = await session.navigation()
        }
        #expect(tree["stacks"]?[0]?["elements"]?[1]?["presentations"]?.arrayValue?.count == 1, "the small fact is shown")
        #expect(tree["stacks"]?[0]?["elements"]?[0]?["presentations"]?.arrayValue?.isEmpty == true, "the large one is dropped")
        #expect(tree["stacks"]?[0]?["elements"]?[0]?["state"]?["factIsLoading"] == .bool(false))
        #expect(await session.stateBytes <= 20_000)
    }

    /// An effect that would show more features than the bound is dropped like one that would
    /// take too many bytes; what the session then does is not refused for the size it has.
    @Test func anEffectPastTheNodeBoundIsDropped() async throws {
        let facts = SizedFacts(delay: { _ in .milliseconds(10) }, size: { _ in 10 })
        let catalog = FeatureSet.catalog(Harness.dependencies(facts: facts))
        let session = try catalog.makeSession(feature: "app", state: json("{}"), limits: SessionLimits(maxNodes: 3))
        for _ in 0..<2 { _ = try await session.perform(target: "root", action: "counterButtonTapped", arguments: nil) }
        #expect(await session.navigation()["stacks"]?[0]?["elements"]?.arrayValue?.count == 2)
        let element = try #require(await session.navigation()["stacks"]?[0]?["elements"]?[0]?["id"]?.stringValue)
        _ = try await session.perform(target: element, action: "factButtonTapped", arguments: nil)
        var tree = await session.navigation()
        for _ in 0..<40 where tree["stacks"]?[0]?["elements"]?[0]?["state"]?["factIsLoading"] != .bool(false) {
            try await Task.sleep(for: .milliseconds(100))
            tree = await session.navigation()
        }
        #expect(tree["stacks"]?[0]?["elements"]?[0]?["state"]?["factIsLoading"] == .bool(false))
        #expect(tree["stacks"]?[0]?["elements"]?[0]?["presentations"]?.arrayValue?.isEmpty == true)
        #expect(try await session.perform(target: element, action: "incrementButtonTapped", arguments: nil).events.count == 1)
    }

    @Test func bindingsAndArgumentsAreMeasuredToo() async throws {
        let session = try session("gallery", #"{"text":""}"#)
        let editor = try #require(await session.navigation()["presentations"]?[0]?["id"]?.stringValue)
        await #expect(throws: NavigationError.self) {
            try await session.bind(target: editor, field: "text", value: .string(String(repeating: "x", count: 17)))
        }
        #expect(try await session.bind(target: editor, field: "text", value: .string(String(repeating: "x", count: 16))).events.count == 1)
    }
}

@Suite struct EventBufferTests {
    private func event(_ sequence: Int, bytes: Int) -> NavigationEvent {
        NavigationEvent(sequence: sequence, kind: .state, data: .string(String(repeating: "x", count: bytes)))
    }

    @Test func theOldestEventsGoWhenTheBytesRunOut() {
        var log = EventLog(capacity: 100, byteLimit: 1000)
        for sequence in 1...10 { log.append(event(sequence, bytes: 298)) }
        #expect(log.bytes <= 1000)
        #expect(log.kept.map(\.sequence) == [8, 9, 10])
        #expect(log.events(after: 7, lastIssued: 10)?.map(\.sequence) == [8, 9, 10])
        #expect(log.events(after: 6, lastIssued: 10) == nil)
        // One event larger than the whole budget is not kept; a resume from before it gets a snapshot.
        log.append(event(11, bytes: 5000))
        #expect(log.kept.isEmpty)
        #expect(log.bytes == 0)
        #expect(log.events(after: 10, lastIssued: 11) == nil)
        #expect(log.events(after: 11, lastIssued: 11)?.isEmpty == true)
    }

    @Test func aLongRunStaysWithinBothBounds() {
        var log = EventLog(capacity: 50, byteLimit: 10_000)
        for sequence in 1...5000 {
            log.append(event(sequence, bytes: sequence % 700))
            #expect(log.count <= 50 && log.bytes <= 10_000)
        }
        #expect(log.kept.last?.sequence == 5000)
    }
}
