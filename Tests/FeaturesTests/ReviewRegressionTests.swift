import Features
import Synchronization
@testable import NavigationCore
import Testing

/// Defects a review found, each pinned by a test that failed before its fix.
@Suite struct ReviewRegressionTests {
    @Test func countingPastIntMaxSaturatesInsteadOfTrapping() async throws {
        let counter = try await Harness("counter", state: ["count": .int(.max)])
        _ = try await counter.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        #expect(await counter.state()["count"] == .int(.max))
        let low = try await Harness("counter", state: ["count": .int(.min)])
        _ = try await low.session.perform(target: "root", action: "decrementButtonTapped", arguments: nil)
        #expect(await low.state()["count"] == .int(.min))
    }

    /// A fact is about the number on screen. A fetch on its way when the number changes (a tap,
    /// a warm deep link) lowers its spinner and drops its answer, as a session made with the new
    /// number never shows that fact; it presented the old number's fact over the new number, and
    /// a tap after the deep link did nothing while no spinner showed.
    @Test func aFactForANumberNoLongerOnScreenIsDropped() async throws {
        for change in ["increment", "deep link"] {
            let facts = HeldFacts()
            var counter = try await Harness("counter", state: json(#"{"count":15}"#), dependencies: Harness.dependencies(facts: facts))
            let fetching = try await counter.session.perform(target: "root", action: "factButtonTapped", arguments: nil)
            if change == "increment" {
                _ = try await counter.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
            } else {
                _ = try await counter.session.replaceState(json(#"{"count":3}"#))
            }
            #expect(await counter.state()["factIsLoading"] == false, "\(change): no spinner for a number no longer shown")
            facts.release()
            _ = await counter.session.waitForEffects(of: fetching, timeout: .seconds(10))
            #expect(await counter.state()["destination"] == .null, "\(change): the old number's fact is dropped")
            #expect(await counter.state()["factIsLoading"] == false)

            let again = try await counter.session.perform(target: "root", action: "factButtonTapped", arguments: nil)
            _ = await counter.session.waitForEffects(of: again, timeout: .seconds(10))
            let number = change == "increment" ? 16 : 3
            #expect(await counter.state()["destination"]?["fact"]?["value"] == .string("\(number) took a while."), "\(change)")
            try await counter.sync()
        }
    }

    /// A deep link that lowers the spinner while a fetch for the same number runs lets a tap
    /// fetch again; the earlier answer no longer counts.
    @Test func aTapAfterADeepLinkLoweredTheSpinnerFetches() async throws {
        let facts = HeldFacts()
        let counter = try await Harness("counter", state: json(#"{"count":4}"#), dependencies: Harness.dependencies(facts: facts))
        _ = try await counter.session.perform(target: "root", action: "factButtonTapped", arguments: nil)
        _ = try await counter.session.replaceState(json(#"{"count":4,"factIsLoading":false}"#))
        let tapped = try await counter.session.perform(target: "root", action: "factButtonTapped", arguments: nil)
        #expect(tapped.effect != nil && !tapped.events.isEmpty, "the tap raised the spinner again")
        #expect(await counter.state()["factIsLoading"] == true)
        facts.release()
        _ = await counter.session.waitForEffects(of: tapped, timeout: .seconds(10))
        #expect(await counter.state()["factIsLoading"] == false)
        #expect(await counter.state()["destination"]?["fact"]?["value"] == .string("4 took a while."))
    }

    /// Settling is the same whenever it is done again at the same moment: with no delay at all,
    /// a deadline moved to "now" would be past due the next time, so such an alert goes at once.
    @Test func aTimedAlertSettlesAlikeWhenSettledAgain() async throws {
        let dependencies = FeatureDependencies(factClient: InstantFacts(), alertDismissDelay: .zero, wallClock: { 1_000 })
        let gallery = try await Harness("gallery", dependencies: dependencies)
        let linked = try await gallery.session.replaceState(json(#"{"timedAlert":{"id":1,"dismissesAt":5000}}"#))
        #expect(linked.events.isEmpty, "no alert to show: it is due as it lands")
        let made = try await Harness("gallery", state: json(#"{"timedAlert":{"id":1,"dismissesAt":5000}}"#), dependencies: dependencies)
        #expect(await made.state()["timedAlert"] == .null)
        #expect(await made.session.describe().version == 0)
    }

    /// A deep link is settled once, against the clock of the moment it lands: starting what that
    /// settling continues reads no clock again. A clock that moved on between two readings had a
    /// session made at version 0 dismiss its alert in a batch of its own before its 201, and a
    /// `PUT` answer two batches (helper-56).
    @Test func aDeepLinkIsSettledOnceAgainstTheClockOfItsLanding() async throws {
        let readings = Mutex(0.0)
        // Every reading a second later than the one before.
        let dependencies = FeatureDependencies(factClient: InstantFacts(), alertDismissDelay: .seconds(60),
                                               wallClock: { readings.withLock { $0 += 1; return 1_000 + $0 } })
        let catalog = FeatureSet.catalog(dependencies)
        let made = try catalog.makeSession(feature: "gallery", state: json(#"{"timedAlert":{"id":1,"dismissesAt":1001.5}}"#))
        #expect(await made.describe().state["timedAlert"] != .null, "due after the reading it was settled against")
        let started = await made.startSettledWork()
        #expect(started.events.isEmpty && started.version == 0, "its timer started; nothing settled again")
        await made.end(.deleted)

        let running = try catalog.makeSession(feature: "gallery", state: nil)
        let reading = readings.withLock { $0 } + 1_001
        let put = try await running.replaceState(json(#"{"timedAlert":{"id":1,"dismissesAt":\#(reading + 0.5)}}"#))
        #expect(put.version == 1 && put.events.map(\.kind) == [.present], "\(put.events.map(\.data))")
        await running.end(.deleted)
    }

    /// A timed alert goes at most the whole delay after its timer is armed, whatever deadline a
    /// deep link gave it; the state said the later deadline all along, so a client counting down
    /// from it was wrong. A deadline within the delay is kept as it is.
    @Test func aTimedAlertsDeadlineSaysWhenItReallyGoes() async throws {
        let now = Mutex(1_000.0)
        var gallery = try await Harness("gallery", dependencies: FeatureDependencies(
            factClient: InstantFacts(), alertDismissDelay: .seconds(10), wallClock: { now.withLock { $0 } }))
        let linked = try await gallery.session.replaceState(json(#"{"timedAlert":{"id":5,"dismissesAt":1060}}"#))
        #expect(linked.events.map(\.kind) == [.present], "settled as it lands, in its one batch")
        #expect(await gallery.state()["timedAlert"] == json(#"{"id":5,"dismissesAt":1010}"#))
        let shown = await gallery.presentation("timedAlert")
        let settled = try await gallery.session.settleEffects()
        #expect(settled.events.isEmpty, "its timer armed, nothing is left to change")
        let after = await gallery.presentation("timedAlert")
        #expect(shown != nil && after == shown, "the same alert, with its deadline changed")
        try await gallery.sync()

        _ = try await gallery.session.replaceState(json(#"{"timedAlert":{"id":6,"dismissesAt":1004.5}}"#))
        #expect(await gallery.state()["timedAlert"] == json(#"{"id":6,"dismissesAt":1004.5}"#))
        await gallery.session.end(.deleted)
    }

    /// How many items and timed alerts a gallery made is state: a session made from another's
    /// state (a restart, a deep link) names its next ones as the one that went on does, after
    /// what it showed was dismissed. It began again at 1.
    @Test func aGalleryMadeFromStateNumbersOnAsTheOneThatWentOn() async throws {
        let going = try await Harness("gallery", dependencies: Harness.dependencies(delay: .seconds(60)))
        for _ in 0..<2 { _ = try await going.session.perform(target: "root", action: "itemButtonTapped", arguments: ["style": "sheet"]) }
        let sheet = try #require(await going.presentation("sheetItem"))
        _ = try await going.session.dismiss(presentation: sheet)
        _ = try await going.session.perform(target: "root", action: "timedAlertButtonTapped", arguments: nil)
        _ = try await going.session.dismiss(presentation: try #require(await going.presentation("timedAlert")))
        let dismissed = await going.state()
        #expect(dismissed["sheetItem"] == .null && dismissed["timedAlert"] == .null)

        let made = try await Harness("gallery", state: await going.state(), dependencies: Harness.dependencies(delay: .seconds(60)))
        for harness in [going, made] {
            _ = try await harness.session.perform(target: "root", action: "sheetAndPopoverButtonTapped", arguments: nil)
            _ = try await harness.session.perform(target: "root", action: "timedAlertButtonTapped", arguments: nil)
            #expect(await harness.state()["sheetItem"]?["id"] == "item3")
            #expect(await harness.state()["popoverItem"]?["id"] == "item4")
            #expect(await harness.state()["timedAlert"]?["id"] == 2)
        }
        // Alike but for the deadline of the alert each showed a moment apart.
        func withoutDeadline(_ state: JSON) -> JSON {
            guard case .object(var object) = state else { return state }
            object["timedAlert"] = object["timedAlert"].map { _ in .null }
            return .object(object)
        }
        let (madeState, goingState) = (await made.state(), await going.state())
        #expect(withoutDeadline(madeState) == withoutDeadline(goingState))
        await going.session.end(.deleted)
        await made.session.end(.deleted)
    }

    /// The gallery numbers its items past those in its state: its count is not state, so a model
    /// made from state (a deep link, a restart) started it again, and a tap made the very item
    /// on screen, which presented nothing (200, no events).
    @Test func aGalleryMadeFromStateMakesItemsPastThoseItShows() async throws {
        let gallery = try await Harness("gallery", state: json(#"{"sheetItem":{"id":"item1","title":"Item 1"},"destination":{"alert":{"id":"item7","title":"Item 7"}}}"#))
        let tap = try await gallery.session.perform(target: "root", action: "itemButtonTapped", arguments: ["style": "sheet"])
        #expect(!tap.events.isEmpty, "a new item is a new presentation")
        #expect(await gallery.state()["sheetItem"]?["id"] == "item8")
        _ = try await gallery.session.perform(target: "root", action: "destinationButtonTapped", arguments: ["style": "confirmationDialog"])
        #expect(await gallery.state()["destination"]?["confirmationDialog"]?["id"] == "item9")
        // Numbers that have run out make no item, rather than trapping or repeating the last.
        let full = try await Harness("gallery", state: json(#"{"popoverItem":{"id":"item9223372036854775807","title":"last"}}"#))
        let refused = try await full.session.perform(target: "root", action: "itemButtonTapped", arguments: ["style": "sheet"])
        #expect(refused.events.isEmpty)
        #expect(await full.state()["sheetItem"] == .null)
    }

    /// A wait's answer lists every event since its request began, from the event buffer; when
    /// other requests pushed some of them out, the effect's events are said to be elsewhere
    /// (`effectsPending`), not silently left out of an answer that looks complete.
    @Test func aWaitWhoseEventsTheBufferNoLongerHoldsSaysSo() async throws {
        let catalog = FeatureSet.catalog(Harness.dependencies(facts: SlowFacts()))
        for eventBuffer in [2, 64] {
            let session = try catalog.makeSession(feature: "app", state: json(#"{"path":[{"counter":{}},{"counter":{}}]}"#),
                                                  limits: SessionLimits(eventBufferCount: eventBuffer))
            let elements = try #require(await session.navigation()["stacks"]?[0]?["elements"]?.arrayValue?.compactMap { $0["id"]?.stringValue })
            let fetch = try await session.perform(target: elements[0], action: "factButtonTapped", arguments: nil)
            for _ in 0..<5 { _ = try await session.perform(target: elements[1], action: "incrementButtonTapped", arguments: nil) }
            let answer = await session.waitForEffects(of: fetch, timeout: .seconds(10))
            if eventBuffer == 2 {
                #expect(answer.effectsPending, "the fact's events are on the stream, not in the answer")
                #expect(answer.events.map(\.sequence) == fetch.events.map(\.sequence))
            } else {
                #expect(!answer.effectsPending)
                // Its own, the five increments', and the fact's: presented, spinner down.
                #expect(answer.events.map(\.sequence) == Array(1...(fetch.events.count + 5 + 2)))
                #expect(answer.events.contains { $0.kind == .present })
            }
        }
    }

    /// A warm deep link that raises a spinner while another feature's fetch runs is settled once
    /// that fetch ends, as a new session with the same state is at once; it was left up for good.
    @Test func aDeepLinkWhileAnEffectRunsIsSettledWhenItEnds() async throws {
        let catalog = FeatureSet.catalog(Harness.dependencies(facts: SlowFacts()))
        let session = try catalog.makeSession(feature: "app", state: json(#"{"path":[{"counter":{}}]}"#))
        let first = try #require(await session.navigation()["stacks"]?[0]?["elements"]?[0]?["id"]?.stringValue)
        _ = try await session.perform(target: first, action: "factButtonTapped", arguments: nil)
        // What `PUT /state` does: the deep link, then its settling.
        _ = try await session.replaceState(json(#"{"path":[{"counter":{"factIsLoading":true}},{"counter":{"factIsLoading":true,"count":5}}]}"#))
        _ = try await session.settleEffects()
        func spinners() async -> [JSON?] {
            (await session.navigation()["stacks"]?[0]?["elements"]?.arrayValue ?? []).map { $0["state"]?["factIsLoading"] }
        }
        var settled = false
        for _ in 0..<60 where !settled {
            try await Task.sleep(for: .milliseconds(100))
            settled = await spinners() == [.bool(false), .bool(false)]
        }
        #expect(settled, "both spinners down, as in a session created with that state")
        await session.end(.deleted)
    }

    /// A Wi-Fi session made from another's state refreshes to the same list as the one that went
    /// on: the scan count lived beside the state, so a deep link or a restart began the scans
    /// again (a refresh then changed nothing, or something else).
    @Test func aWifiRefreshFollowsTheListOnScreenNotAHiddenCount() async throws {
        let going = try await Harness("wifi")
        for round in 1...12 {
            let made = try await Harness("wifi", state: await going.state())
            _ = try await going.session.perform(target: "root", action: "refreshNetworks", arguments: nil)
            let refreshed = try await made.session.perform(target: "root", action: "refreshNetworks", arguments: nil)
            #expect(await made.state()["foundNetworks"] == going.state()["foundNetworks"], "round \(round)")
            #expect(!refreshed.events.isEmpty, "every refresh changes the list")
        }
    }

    @Test func waitingForAnEffectIsBoundedByItsTimeout() async throws {
        let gallery = try await Harness("gallery", dependencies: Harness.dependencies(delay: .seconds(60)))
        let started = ContinuousClock.now
        let outcome = try await gallery.session.perform(target: "root", action: "timedAlertButtonTapped", arguments: nil)
        _ = await gallery.session.waitForEffects(of: outcome, timeout: .milliseconds(200))
        // Far below the effect's 60 s, with room for a busy test machine.
        #expect(ContinuousClock.now - started < .seconds(30))
        await gallery.session.end(.deleted)
    }

    @Test func anEndedSessionRefusesWorkAndTellsNewSubscribers() async throws {
        let counter = try await Harness("counter")
        await counter.session.end(.deleted)
        await #expect(throws: NavigationError.sessionEnded) {
            try await counter.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        }
        guard case .ended(let end) = await counter.session.attach(after: nil, { start, _ in start }) else {
            Issue.record("expected the end event")
            return
        }
        #expect(end.kind == .end)
    }

    @Test func aJoinThatFinishesAfterTheSheetWasDismissedChangesNothing() async throws {
        var wifi = try await Harness("wifi", dependencies: Harness.dependencies(delay: .milliseconds(300)))
        _ = try await wifi.session.perform(target: "root", action: "networkTapped", arguments: ["network": "n1"])
        let connect = try #require(await wifi.presentation("destination.connect"))
        _ = try await wifi.session.bind(target: connect, field: "password", value: "blob")
        let join = try await wifi.session.perform(target: connect, action: "joinButtonTapped", arguments: nil)
        _ = try await wifi.session.dismiss(presentation: connect)
        _ = try await wifi.session.perform(target: "root", action: "infoButtonTapped", arguments: ["network": "n3"])
        let detail = try #require(await wifi.presentation("destination.detail"))
        _ = await wifi.session.waitForEffects(of: join, timeout: .seconds(5))
        #expect(await wifi.presentation("destination.detail") == detail)
        #expect(await wifi.state()["selectedNetworkID"] == .null)
        try await wifi.sync()
    }

    @Test func wifiThatIsOffHasNoSelectionWhateverTheKeyOrder() async throws {
        let wifi = try await Harness("wifi", state: json(#"{"isOn":false,"selectedNetworkID":"n2"}"#))
        #expect(await wifi.state()["selectedNetworkID"] == .null)
        #expect(await wifi.state()["isOn"] == false)
    }

    @Test func newAlertTextIsANewAlert_soAWarmDeepLinkStillEqualsACold() async throws {
        let before = #"{"destination":{"detail":{"network":{"id":"n2","name":"Old","isSecured":false,"connectivity":0.5},"forgetAlertIsPresented":true}}}"#
        let after = #"{"destination":{"detail":{"network":{"id":"n2","name":"New","isSecured":false,"connectivity":0.5},"forgetAlertIsPresented":true}}}"#
        var warm = try await Harness("wifi", state: json(before))
        let outcome = try await warm.session.replaceState(json(after))
        #expect(outcome.events.kinds == ["dismiss", "present", "state"])
        let cold = try await Harness("wifi", state: json(after))
        #expect(NavigationReplica.shape(of: await warm.tree()) == NavigationReplica.shape(of: await cold.tree()))
        try await warm.sync()
    }

    @Test func nestingStopsAtItsMaximumLevel() async throws {
        let gallery = try await Harness("gallery", state: json(#"{"nested":{"level":\#(NestedModel.maximumLevel)}}"#))
        let top = try #require(await gallery.presentation("nested"))
        let outcome = try await gallery.session.perform(target: top, action: "presentChildButtonTapped", arguments: nil)
        #expect(outcome.events.isEmpty)
    }
}

extension ReviewRegressionTests {
    @Test func tappingANetworkWhileWifiIsOffDoesNothing() async throws {
        let wifi = try await Harness("wifi", state: ["isOn": false])
        for action in ["networkTapped", "infoButtonTapped"] {
            let outcome = try await wifi.session.perform(target: "root", action: action, arguments: ["network": "n2"])
            #expect(outcome.events.isEmpty, "\(action)")
        }
    }
}
