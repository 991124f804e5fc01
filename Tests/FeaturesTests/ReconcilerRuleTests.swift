import Features
@testable import NavigationCore
import Testing

/// API.md's reconciler rules, each with a test that fails when the rule is broken.
@Suite struct ReconcilerRuleTests {
    @Test func rule1_sameIdentityWithChangedContentEmitsStateOnly() async throws {
        var harness = try await Harness("counter")
        _ = try await harness.session.perform(target: "root", action: "settingsButtonTapped", arguments: nil)
        try await harness.sync()
        let settings = try #require(await harness.presentation("destination.settings"))
        let outcome = try await harness.session.bind(target: settings, field: "isOn", value: true)
        #expect(outcome.events.kinds == ["state"])
        #expect(outcome.events.first?.data == json(#"{"feature":"\#(settings)","changes":{"isOn":true}}"#))
        try await harness.sync()
    }

    @Test func rule1_newIdentityInASlotIsDismissThenPresent() async throws {
        var harness = try await Harness("counter", state: json(#"{"destination":{"fact":{"value":"one"}}}"#))
        let first = try #require(await harness.presentation("destination.fact"))
        let outcome = try await harness.session.replaceState(json(#"{"destination":{"fact":{"value":"two"}}}"#))
        #expect(outcome.events.kinds == ["dismiss", "present"])
        #expect(outcome.events[0].data["id"] == .string(first))
        #expect(outcome.events[1].data["state"] == json(#"{"value":"two"}"#))
        try await harness.sync()
    }

    @Test func rule2_unrelatedChangesDuringAPresentationNeverPresentOrDismiss() async throws {
        var harness = try await Harness("wifi")
        _ = try await harness.session.perform(target: "root", action: "networkTapped", arguments: ["network": "n1"])
        try await harness.sync()
        let connect = try #require(await harness.presentation("destination.connect"))
        for text in ["b", "bl", "blo"] {
            let typed = try await harness.session.bind(target: connect, field: "password", value: .string(text))
            #expect(typed.events.kinds == ["state"])
        }
        // A rescan that keeps the presented network changes the list, not the screen.
        let refreshed = try await harness.session.perform(target: "root", action: "refreshNetworks", arguments: nil)
        #expect(refreshed.events.kinds == ["state"])
        #expect(await harness.presentation("destination.connect") == connect)
        try await harness.sync()
    }

    @Test func rule3_aNestedDismissalGoesDeepestFirst() async throws {
        var harness = try await Harness("gallery")
        _ = try await harness.session.perform(target: "root", action: "nestedButtonTapped", arguments: nil)
        let level1 = try #require(await harness.presentation("nested"))
        _ = try await harness.session.perform(target: level1, action: "presentChildButtonTapped", arguments: nil)
        let level2 = try #require(await harness.presentation("child", of: level1))
        _ = try await harness.session.perform(target: level2, action: "presentChildButtonTapped", arguments: nil)
        let level3 = try #require(await harness.presentation("child", of: level2))
        try await harness.sync()

        let outcome = try await harness.session.dismiss(presentation: level1)
        #expect(outcome.events.kinds == ["dismiss", "dismiss", "dismiss"])
        #expect(outcome.events.map { $0.data["id"] } == [.string(level3), .string(level2), .string(level1)])
        #expect(outcome.events.allSatisfy { $0.data["origin"] == "client" })
        try await harness.sync()
    }

    @Test func rule3_removalsThenAdditionsThenState() async throws {
        var harness = try await Harness("app", state: json(#"{"path":[{"counter":{"destination":{"settings":{}}}}]}"#))
        let (stack, ids) = await harness.elements()
        let counter = try #require(ids.first)
        // One transaction that pops a feature with a presentation and pushes a new one.
        let outcome = try await harness.session.replaceState(json(#"{"path":[{"settings":{"isOn":true}}]}"#))
        #expect(outcome.events.kinds == ["dismiss", "pop", "push"])
        #expect(outcome.events[1].data == json(#"{"stack":"\#(stack)","ids":["\#(counter)"],"origin":"server"}"#))
        try await harness.sync()
    }

    @Test func rule4_switchingAnEnumCaseIsDismissThenPresentInOneBatch() async throws {
        var harness = try await Harness("counter")
        _ = try await harness.session.perform(target: "root", action: "settingsButtonTapped", arguments: nil)
        try await harness.sync()
        let settings = try #require(await harness.presentation("destination.settings"))
        let started = try await harness.session.perform(target: "root", action: "factButtonTapped", arguments: nil)
        _ = await harness.session.waitForEffects(of: started, timeout: .seconds(5))
        let batches = try await harness.sync()
        let switching = try #require(batches.first { $0.contains { $0.kind == .present } })
        #expect(switching.kinds.prefix(2) == ["dismiss", "present"])
        #expect(switching[0].data["id"] == .string(settings))
        #expect(switching[1].data["slot"] == "destination.fact")

        // A synchronous switch, too: one enum destination is never shown twice.
        var gallery = try await Harness("gallery")
        _ = try await gallery.session.perform(target: "root", action: "destinationButtonTapped", arguments: ["style": "sheet"])
        let sheet = try #require(await gallery.presentation("destination.sheet"))
        let outcome = try await gallery.session.perform(target: "root", action: "destinationButtonTapped", arguments: ["style": "popover"])
        #expect(outcome.events.kinds == ["dismiss", "present"])
        #expect(outcome.events[0].data["id"] == .string(sheet))
        #expect(outcome.events[1].data["anchor"] == "popoverButton")
        try await gallery.sync()
    }

    @Test func rule5_aClientDismissalWritesNilAndIsEchoedAsClient() async throws {
        var harness = try await Harness("counter", state: json(#"{"count":3,"destination":{"fact":{"value":"3 is odd"}}}"#))
        let fact = try #require(await harness.presentation("destination.fact"))
        let outcome = try await harness.session.dismiss(presentation: fact)
        #expect(outcome.events.map(\.data) == [json(#"{"id":"\#(fact)","origin":"client"}"#)])
        #expect(await harness.state()["destination"] == .null)
        try await harness.sync()
    }

    @Test func rule5_aStaleDismissalOrPopIsRejectedAndChangesNothing() async throws {
        var harness = try await Harness("app", state: json(#"{"path":[{"counter":{"destination":{"fact":{"value":"old"}}}},{"settings":{}}]}"#))
        let (stack, ids) = await harness.elements()
        let counter = ids[0]
        let old = try #require(await harness.presentation("destination.fact", of: counter))
        // The fact is replaced by a new one: the old id is stale.
        _ = try await harness.session.replaceState(json(#"{"path":[{"counter":{"destination":{"fact":{"value":"new"}}}},{"settings":{}}]}"#))
        try await harness.sync()
        let before = await harness.session.describe()

        await #expect(throws: NavigationError.notOnScreen(kind: "presentation", id: old)) {
            try await harness.session.dismiss(presentation: old)
        }
        await #expect(throws: NavigationError.notOnScreen(kind: "element", id: "e999")) {
            try await harness.session.pop(stack: stack, .to("e999"))
        }
        await #expect(throws: NavigationError.notOnScreen(kind: "stack", id: "s999")) {
            try await harness.session.pop(stack: "s999", .count(1))
        }
        await #expect(throws: NavigationError.self) {
            try await harness.session.pop(stack: stack, .count(3))
        }
        let after = await harness.session.describe()
        #expect(after.version == before.version)
        #expect(after.state == before.state)
        #expect(after.navigation == before.navigation)
        #expect(try await harness.sync().isEmpty)
    }

    @Test func rule5_anAlertButtonRunsItsActionAndTheDismissalInOneTransaction() async throws {
        var harness = try await Harness("wifi", state: json(#"{"selectedNetworkID":"n2"}"#))
        _ = try await harness.session.perform(target: "root", action: "networkTapped", arguments: ["network": "n2"])
        let detail = try #require(await harness.presentation("destination.detail"))
        _ = try await harness.session.perform(target: detail, action: "forgetNetworkButtonTapped", arguments: nil)
        let alert = try #require(await harness.presentation("forgetAlertIsPresented", of: detail))
        let tree = await harness.tree()
        let alertNode = tree["presentations"]?.arrayValue?.first?["presentations"]?.arrayValue?.first
        #expect(alertNode?["alert"] == json(#"{"title":"Forget Wi-Fi Network \"Blob Café\"?","message":null,"buttons":[{"id":"cancel","label":"Cancel","role":"cancel"},{"id":"forget","label":"Forget","role":"destructive"}]}"#))
        try await harness.sync()

        let outcome = try await harness.session.dismiss(presentation: alert, button: "forget")
        #expect(outcome.events.kinds == ["dismiss", "dismiss", "state"])
        #expect(outcome.events[0].data == json(#"{"id":"\#(alert)","origin":"client"}"#))
        #expect(outcome.events[1].data == json(#"{"id":"\#(detail)","origin":"server"}"#))
        #expect(outcome.events[2].data == json(#"{"feature":"root","changes":{"selectedNetworkID":null}}"#))
        try await harness.sync()

        await #expect(throws: NavigationError.notOnScreen(kind: "presentation", id: alert)) {
            try await harness.session.dismiss(presentation: alert, button: "forget")
        }
    }

    @Test func rule5_anUnknownButtonIsRejected() async throws {
        let harness = try await Harness("counter", state: json(#"{"destination":{"fact":{"value":"x"}}}"#))
        let fact = try #require(await harness.presentation("destination.fact"))
        await #expect(throws: NavigationError.unknownButton(presentation: fact, button: "nope")) {
            try await harness.session.dismiss(presentation: fact, button: "nope")
        }
        #expect(await harness.presentation("destination.fact") == fact)
    }

    @Test func rule6_aStackWhoseMiddleElementIsReplacedPopsTheTailAndPushesTheNewOne() async throws {
        var harness = try await Harness("app", state: json(#"{"path":[{"counter":{}},{"settings":{}},{"counter":{"count":2}}]}"#))
        let (stack, ids) = await harness.elements()
        let outcome = try await harness.session.replaceState(json(#"{"path":[{"counter":{}},{"counter":{"count":1}},{"counter":{"count":2}}]}"#))
        #expect(outcome.events.kinds == ["pop", "push", "push"])
        #expect(outcome.events[0].data == json(#"{"stack":"\#(stack)","ids":["\#(ids[2])","\#(ids[1])"],"origin":"server"}"#))
        #expect(outcome.events[1].data["index"] == 1)
        #expect(outcome.events[1].data["state"] == json(#"{"count":1,"factIsLoading":false}"#))
        #expect(outcome.events[2].data["index"] == 2)
        #expect(await harness.elements().ids.first == ids[0])
        try await harness.sync()
    }

    @Test func rule7_aDeepLinkSnapshotEqualsReplayingEveryEventFromAnEmptyScreen() async throws {
        let state = json(#"{"path":[{"counter":{}},{"settings":{"isOn":true}},{"counter":{"destination":{"fact":{"value":"0 is a good number"}}}}]}"#)
        let harness = try await Harness("app", state: state)
        let snapshot = await harness.tree()
        // The empty screen: the root with its stacks and nothing in them.
        var empty = try #require(snapshot.objectValue)
        empty["stacks"] = .array((snapshot["stacks"]?.arrayValue ?? []).map { stack in
            var stack = stack.objectValue ?? JSONObject()
            stack["elements"] = .array([])
            return .object(stack)
        })
        var replica = try NavigationReplica(navigation: .object(empty))
        let events = await harness.session.initialEvents()
        #expect(events.map(\.0.rawValue) == ["push", "push", "push", "present"])
        for (kind, data) in events { try replica.apply(event: kind.rawValue, data: data) }
        #expect(replica.navigation == snapshot)
    }

    @Test func rule7_aWarmDeepLinkEqualsAColdOne() async throws {
        let states = [
            #"{"path":[{"counter":{}},{"settings":{"isOn":true}},{"counter":{"count":4,"destination":{"fact":{"value":"0 is a good number"}}}}]}"#,
            #"{"path":[{"settings":{}}]}"#,
            #"{}"#,
        ]
        var warm = try await Harness("app", state: json(#"{"path":[{"counter":{"destination":{"settings":{}}}}]}"#))
        for text in states {
            _ = try await warm.session.replaceState(json(text))
            try await warm.sync()
            let cold = try await Harness("app", state: json(text))
            #expect(NavigationReplica.shape(of: await warm.tree()) == NavigationReplica.shape(of: await cold.tree()))
            #expect(await warm.state() == cold.state())
        }
    }

    @Test func ifMatchOnAnotherVersionIsRejected() async throws {
        let harness = try await Harness("counter")
        let outcome = try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil, ifMatch: 0)
        #expect(outcome.version == 1)
        await #expect(throws: NavigationError.versionMismatch(expected: 0, current: 1)) {
            try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil, ifMatch: 0)
        }
        #expect(await harness.state()["count"] == 1)
    }

    @Test func resumingReplaysWhatWasMissedOrFallsBackToASnapshot() async throws {
        let dependencies = Harness.dependencies()
        let session = try FeatureSet.catalog(dependencies).makeSession(feature: "counter", state: nil, limits: SessionLimits(eventBufferCount: 4))
        for _ in 0..<6 { _ = try await session.perform(target: "root", action: "incrementButtonTapped", arguments: nil) }
        let recent = await session.attach(after: 4, { start, _ in start })
        guard case .resume(let events) = recent else { Issue.record("expected a resume"); return }
        #expect(events.map(\.sequence) == [5, 6])
        for stale in [1, 7, -1] {
            guard case .snapshot(let snapshot) = await session.attach(after: stale, { start, _ in start }) else {
                Issue.record("expected a snapshot for \(stale)")
                continue
            }
            #expect(snapshot.sequence == 6)
            #expect(snapshot.data["version"] == 6)
        }
        guard case .resume(let none) = await session.attach(after: 6, { start, _ in start }) else { Issue.record("expected a resume"); return }
        #expect(none.isEmpty)

        // Missed events that would take more than the stream holds: a snapshot instead.
        let bytes = events.reduce(0) { $0 + $1.encodedData.count }
        guard case .resume = await session.attach(after: 4, replayLimit: bytes, { start, _ in start }) else { Issue.record("expected a resume"); return }
        guard case .snapshot(let instead) = await session.attach(after: 4, replayLimit: bytes - 1, { start, _ in start }) else {
            Issue.record("expected a snapshot for a replay over the limit")
            return
        }
        #expect(instead.sequence == 6)
    }

    /// Streams that open while nothing changes share one encoded snapshot; any change, a deep
    /// link in place included, makes the next one afresh.
    @Test func snapshotsAreSharedUntilTheTreeChanges() async throws {
        let session = try FeatureSet.catalog(Harness.dependencies()).makeSession(feature: "app", state: nil)
        func snapshot() async -> NavigationEvent? {
            guard case .snapshot(let event) = await session.attach(after: nil, { start, _ in start }) else { return nil }
            return event
        }
        func buffer(_ event: NavigationEvent?) -> UnsafeRawPointer? {
            event?.encodedData.withUnsafeBytes { $0.baseAddress }
        }
        let first = await snapshot(), second = await snapshot()
        #expect(buffer(first) != nil && buffer(first) == buffer(second))

        let pushed = try await session.push(from: "root", value: json(#"{"settings":{}}"#))
        let afterPush = await snapshot()
        #expect(afterPush?.sequence == pushed.through && afterPush?.data["version"] == .int(pushed.version))
        #expect(afterPush?.data["navigation"] == (await session.navigation()))
        #expect(buffer(afterPush) != buffer(first))

        let relinked = try await session.replaceState(json(#"{"path":[{"counter":{"count":5}}]}"#))
        let afterDeepLink = await snapshot()
        #expect(afterDeepLink?.data["version"] == .int(relinked.version))
        #expect(afterDeepLink?.data["navigation"] == (await session.navigation()))
    }
}
