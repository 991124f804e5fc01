import Features
import Foundation
@testable import NavigationCore
import Synchronization
import Testing
import TestSupport

/// Every flow of FEATURES.md, end to end at the model level.
@Suite struct FlowTests {
    @Test func wifi_wrongPassword_alert_rightPassword_connected_detail_forget() async throws {
        var wifi = try await Harness("wifi")
        _ = try await wifi.session.perform(target: "root", action: "networkTapped", arguments: ["network": "n1"])
        let connect = try #require(await wifi.presentation("destination.connect"))
        _ = try await wifi.session.bind(target: connect, field: "password", value: "wrong")
        let join = try await wifi.session.perform(target: connect, action: "joinButtonTapped", arguments: nil)
        #expect(join.events.map(\.data) == [json(#"{"feature":"\#(connect)","changes":{"isConnecting":true}}"#)])
        let joined = await wifi.session.waitForEffects(of: join, timeout: .seconds(5))
        #expect(joined.events.kinds == ["state", "present", "state"])
        let alert = try #require(await wifi.presentation("incorrectPasswordAlertIsPresented", of: connect))
        #expect(await wifi.tree()["presentations"]?[0]?["presentations"]?[0]?["alert"]?["title"] == #"Incorrect password for "Blob's Home""#)
        try await wifi.sync()

        _ = try await wifi.session.dismiss(presentation: alert, button: "ok")
        _ = try await wifi.session.bind(target: connect, field: "password", value: "blob")
        let retry = try await wifi.session.perform(target: connect, action: "joinButtonTapped", arguments: nil)
        let connected = await wifi.session.waitForEffects(of: retry, timeout: .seconds(5))
        #expect(connected.events.contains { $0.kind == .dismiss && $0.data["id"] == .string(connect) })
        #expect(await wifi.state()["selectedNetworkID"] == "n1")
        #expect(await wifi.presentation("destination.connect") == nil)
        try await wifi.sync()

        _ = try await wifi.session.perform(target: "root", action: "networkTapped", arguments: ["network": "n1"])
        let detail = try #require(await wifi.presentation("destination.detail"))
        _ = try await wifi.session.perform(target: detail, action: "forgetNetworkButtonTapped", arguments: nil)
        let forget = try #require(await wifi.presentation("forgetAlertIsPresented", of: detail))
        _ = try await wifi.session.dismiss(presentation: forget, button: "forget")
        #expect(await wifi.state()["selectedNetworkID"] == .null)
        #expect(await wifi.tree()["presentations"] == .array([]))
        try await wifi.sync()
    }

    /// Joining again while a join is under way changes nothing and starts nothing: the spinner
    /// stays up until the first join ends, which reads the password as it is then.
    @Test func wifi_aSecondJoinWhileConnectingDoesNothing() async throws {
        var wifi = try await Harness("wifi", dependencies: Harness.dependencies(delay: .milliseconds(400)))
        _ = try await wifi.session.perform(target: "root", action: "networkTapped", arguments: ["network": "n1"])
        let connect = try #require(await wifi.presentation("destination.connect"))
        let join = try await wifi.session.perform(target: connect, action: "joinButtonTapped", arguments: nil)
        _ = try await wifi.session.bind(target: connect, field: "password", value: "blob")
        let again = try await wifi.session.perform(target: connect, action: "joinButtonTapped", arguments: nil)
        #expect(again.events.isEmpty)
        #expect(await wifi.session.waitForEffects(of: again, timeout: .milliseconds(100)).effectsPending == false)
        let joined = await wifi.session.waitForEffects(of: join, timeout: .seconds(5))
        #expect(joined.events.contains { $0.kind == .dismiss && $0.data["id"] == .string(connect) }, "the password typed meanwhile counts")
        #expect(await wifi.state()["selectedNetworkID"] == "n1")
        try await wifi.sync()
    }

    @Test func wifi_tappingAnOpenNetworkSelectsIt_andTurningWifiOffClearsEverything() async throws {
        var wifi = try await Harness("wifi")
        let selected = try await wifi.session.perform(target: "root", action: "networkTapped", arguments: ["network": "n2"])
        #expect(selected.events.map(\.data) == [json(#"{"feature":"root","changes":{"selectedNetworkID":"n2"}}"#)])
        _ = try await wifi.session.perform(target: "root", action: "infoButtonTapped", arguments: ["network": "n3"])
        #expect(await wifi.presentation("destination.detail") != nil)
        let off = try await wifi.session.bind(target: "root", field: "isOn", value: false)
        #expect(off.events.kinds == ["dismiss", "state"])
        #expect(off.events[1].data["changes"] == json(#"{"isOn":false,"selectedNetworkID":null}"#))
        try await wifi.sync()
    }

    @Test func wifi_refreshDismissesOnlyWhenThePresentedNetworkDisappears() async throws {
        var wifi = try await Harness("wifi")
        _ = try await wifi.session.perform(target: "root", action: "infoButtonTapped", arguments: ["network": "n4"])
        let refreshed = try await wifi.session.perform(target: "root", action: "refreshNetworks", arguments: nil)
        #expect(refreshed.events.kinds == ["dismiss", "state"])
        #expect(await wifi.state()["foundNetworks"]?.arrayValue?.count == 4)
        try await wifi.sync()
    }

    @Test func app_threeDeepLinkWithASheetOnTop_thenPopTwo() async throws {
        var app = try await Harness("app", state: json(#"{"path":[{"counter":{}},{"settings":{}},{"counter":{"destination":{"fact":{"value":"0 is a good number"}}}}]}"#))
        let (stack, ids) = await app.elements()
        #expect(ids.count == 3)
        let sheet = try #require(await app.presentation("destination.fact", of: ids[2]))
        let tree = await app.tree()
        let top = tree["stacks"]?[0]?["elements"]?[2]
        #expect(top?["presentations"]?[0]?["style"] == "sheet")
        #expect(top?["presentations"]?[0]?["state"] == json(#"{"value":"0 is a good number"}"#))

        let popped = try await app.session.pop(stack: stack, .count(2))
        #expect(popped.events.map(\.data) == [
            json(#"{"id":"\#(sheet)","origin":"client"}"#),
            json(#"{"stack":"\#(stack)","ids":["\#(ids[2])","\#(ids[1])"],"origin":"client"}"#),
        ])
        #expect(await app.state() == json(#"{"path":[{"counter":{"count":0,"factIsLoading":false,"destination":null}}]}"#))
        try await app.sync()
    }

    @Test func app_pushFromAnywhere() async throws {
        var app = try await Harness("app")
        _ = try await app.session.perform(target: "root", action: "counterButtonTapped", arguments: nil)
        let counter = try #require(await app.elements().ids.first)
        _ = try await app.session.perform(target: counter, action: "settingsButtonTapped", arguments: nil)
        let settings = try #require(await app.presentation("destination.settings", of: counter))

        // From a drill-down inside a stack element: the nearest enclosing stack is the root's path.
        let pushed = try await app.session.push(from: settings, value: json(#"{"counter":{"count":7}}"#))
        #expect(pushed.events.kinds == ["push"])
        #expect(pushed.events[0].data["state"] == json(#"{"count":7,"factIsLoading":false}"#))
        #expect(await app.elements().ids.count == 2)

        let before = await app.session.describe()
        await #expect(throws: NavigationError.notAccepted(feature: settings, value: #""wifi""#)) {
            try await app.session.push(from: settings, value: json(#"{"wifi":{}}"#))
        }
        await #expect(throws: NavigationError.invalidArgument(StateError(JSONPath("value").appending("counter").appending("count"), "expected an integer, found string"))) {
            try await app.session.push(from: "root", value: json(#"{"counter":{"count":"seven"}}"#))
        }
        // Two cases at once is a malformed value, refused as a deep link would refuse it, not
        // taken for a case no stack accepts.
        await #expect {
            try await app.session.push(from: "root", value: json(#"{"counter":{},"settings":{}}"#))
        } throws: { error in
            guard case NavigationError.invalidArgument(let refusal) = error else { return false }
            return refusal.path == JSONPath("value") && refusal.description.contains("exactly one of the keys")
        }
        #expect(await app.session.describe().state == before.state)

        // A counter hosted alone has no stack around it.
        let lone = try await Harness("counter")
        await #expect(throws: NavigationError.notAccepted(feature: "root", value: #""settings""#)) {
            try await lone.session.push(from: "root", value: json(#"{"settings":{}}"#))
        }
        try await app.sync()
    }

    @Test func counter_factFromTheLoopbackService() async throws {
        let stub = try FactStub(.facts)
        defer { stub.stop() }
        var counter = try await Harness("counter", state: ["count": 42], dependencies: Harness.dependencies(facts: LiveFactClient(baseURL: stub.baseURL)))
        let started = try await counter.session.perform(target: "root", action: "factButtonTapped", arguments: nil)
        #expect(started.events.map(\.data) == [json(#"{"feature":"root","changes":{"factIsLoading":true}}"#)])
        let finished = await counter.session.waitForEffects(of: started, timeout: .seconds(10))
        #expect(finished.events.kinds == ["state", "present", "state"])
        #expect(finished.events[1].data["state"] == json(#"{"value":"42 is a stub number."}"#))
        #expect(await counter.state()["factIsLoading"] == false)
        #expect(stub.requestedPaths == ["/42"])
        try await counter.sync()

        let sheet = try #require(await counter.presentation("destination.fact"))
        let dismissed = try await counter.session.perform(target: "root", action: "dismissFactButtonTapped", arguments: nil)
        #expect(dismissed.events.map(\.data) == [json(#"{"id":"\#(sheet)","origin":"server"}"#)])
    }

    @Test(arguments: [FactStub.Behavior.status(500), .emptyBody])
    func counter_factFailureFromTheServiceIsAnAlert(_ behavior: FactStub.Behavior) async throws {
        let stub = try FactStub(behavior)
        defer { stub.stop() }
        try await expectFailureAlert(LiveFactClient(baseURL: stub.baseURL)) { message in
            switch behavior {
            case .status: message.contains("500")
            default: message.contains("empty")
            }
        }
    }

    @Test func counter_factFailureWhenTheServiceIsUnreachable() async throws {
        let refusing = try Loopback.RefusingPort()
        let client = LiveFactClient(baseURL: try #require(FactServiceURL("http://127.0.0.1:\(refusing.port)")))
        try await expectFailureAlert(client) { $0.contains("connection refused") }
        withExtendedLifetime(refusing) {}
    }

    @Test func counter_factTimeoutIsAnAlert() async throws {
        let stub = try FactStub(.silent)
        defer { stub.stop() }
        try await expectFailureAlert(LiveFactClient(baseURL: stub.baseURL, timeout: .milliseconds(300))) { $0.contains("did not answer") }
    }

    private func expectFailureAlert(_ client: LiveFactClient, _ matches: (String) -> Bool) async throws {
        var counter = try await Harness("counter", dependencies: Harness.dependencies(facts: client))
        let started = try await counter.session.perform(target: "root", action: "factButtonTapped", arguments: nil)
        _ = await counter.session.waitForEffects(of: started, timeout: .seconds(10))
        let tree = await counter.tree()
        let alert = tree["presentations"]?[0]
        #expect(alert?["style"] == "alert")
        let message = alert?["alert"]?["message"]?.stringValue ?? ""
        #expect(matches(message), "alert says: \(message)")
        #expect(await counter.state()["factIsLoading"] == false)
        try await counter.sync()
    }

    @Test func counter_changingTheNumberDismissesWhatWasShown() async throws {
        let counter = try await Harness("counter", state: json(#"{"destination":{"settings":{}}}"#))
        let outcome = try await counter.session.perform(target: "root", action: "decrementButtonTapped", arguments: nil)
        #expect(outcome.events.kinds == ["dismiss", "state"])
        #expect(await counter.state()["count"] == -1)
    }

    @Test func gallery_everyStyleByEveryKindOfState() async throws {
        var gallery = try await Harness("gallery")
        for style in PresentationStyle.allCases {
            for action in ["isPresentedButtonTapped", "itemButtonTapped", "destinationButtonTapped"] {
                let outcome = try await gallery.session.perform(target: "root", action: action, arguments: ["style": .string(style.rawValue)])
                let present = try #require(outcome.events.last { $0.kind == .present })
                #expect(present.data["style"] == .string(style.rawValue))
                if style == .alert || style == .confirmationDialog { #expect(present.data["alert"] != nil) }
                if style == .popover { #expect(present.data["anchor"] == "popoverButton") }
            }
        }
        // 6 Bools and 6 items, and the enum's last case.
        #expect(await gallery.tree()["presentations"]?.arrayValue?.count == 13)
        try await gallery.sync()
    }

    @Test func gallery_twoOptionalsAtOnce() async throws {
        var gallery = try await Harness("gallery")
        let outcome = try await gallery.session.perform(target: "root", action: "sheetAndPopoverButtonTapped", arguments: nil)
        // Both presented, then the count of items made, which is state.
        #expect(outcome.events.kinds == ["present", "present", "state"])
        #expect(Set(outcome.events.compactMap { $0.data["slot"]?.stringValue }) == ["sheetItem", "popoverItem"])
        #expect(outcome.events.last?.data == json(#"{"feature":"root","changes":{"itemsMade":2}}"#))
        try await gallery.sync()
    }

    @Test func gallery_editingAnUnwrappedOptionalWritesBackToTheParent() async throws {
        var gallery = try await Harness("gallery")
        _ = try await gallery.session.perform(target: "root", action: "editTextButtonTapped", arguments: nil)
        let editor = try #require(await gallery.presentation("text"))
        let typed = try await gallery.session.bind(target: editor, field: "text", value: "Hello")
        #expect(typed.events.map(\.data) == [json(#"{"feature":"\#(editor)","changes":{"text":"Hello"}}"#)])
        #expect(await gallery.state()["text"] == "Hello")
        #expect(await gallery.presentation("text") == editor)
        try await gallery.sync()
    }

    @Test func gallery_anAlertDismissesItself_butAnOldTimerNeverDismissesANewerAlert() async throws {
        var gallery = try await Harness("gallery", dependencies: Harness.dependencies(delay: .milliseconds(1200)))
        let first = try await gallery.session.perform(target: "root", action: "timedAlertButtonTapped", arguments: nil)
        let firstAlert = try #require(await gallery.presentation("timedAlert"))
        _ = try await gallery.session.dismiss(presentation: firstAlert, button: "ok")
        try await Task.sleep(for: .milliseconds(600))
        let second = try await gallery.session.perform(target: "root", action: "timedAlertButtonTapped", arguments: nil)
        let secondShown = ContinuousClock.now
        let secondAlert = try #require(await gallery.presentation("timedAlert"))
        // The first timer fires at about 1.2 s, while the second alert is up: it must not touch it.
        // (Only the second timer may take it down, and not before its own delay has passed.)
        _ = await gallery.session.waitForEffects(of: first, timeout: .seconds(5))
        let stillShown = await gallery.presentation("timedAlert") == secondAlert
        #expect(stillShown || ContinuousClock.now - secondShown >= .milliseconds(1200))
        let dismissed = await gallery.session.waitForEffects(of: second, timeout: .seconds(5))
        #expect(dismissed.events.contains { $0.kind == .dismiss && $0.data == json(#"{"id":"\#(secondAlert)","origin":"server"}"#) })
        #expect(await gallery.presentation("timedAlert") == nil)
        try await gallery.sync()
    }

    /// Each tap's alert replaces the one before, and its timer the one before: a flood of taps
    /// leaves one timer running, not one per tap for the whole delay.
    @Test func gallery_aNewerAlertsTimerEndsTheOneBefore() async throws {
        var gallery = try await Harness("gallery", dependencies: Harness.dependencies(delay: .seconds(30)))
        let first = try await gallery.session.perform(target: "root", action: "timedAlertButtonTapped", arguments: nil)
        let second = try await gallery.session.perform(target: "root", action: "timedAlertButtonTapped", arguments: nil)
        let secondAlert = try #require(await gallery.presentation("timedAlert"))
        let replaced = await gallery.session.waitForEffects(of: first, timeout: .seconds(5))
        #expect(!replaced.effectsPending, "the first tap's timer ended when the second alert took over")
        #expect(await gallery.presentation("timedAlert") == secondAlert, "an ended timer dismisses nothing")
        let waiting = await gallery.session.waitForEffects(of: second, timeout: .milliseconds(200))
        #expect(waiting.effectsPending, "the alert on screen keeps its timer")
        try await gallery.sync()
    }

    /// A deep link sets state and starts no work (rule 7): settled as navd settles it, a loading
    /// flag it raises goes down as a cancelled fetch leaves it, and an alert it shows with a
    /// deadline gets its timer, as after a restart; an alert without one is the user's to dismiss.
    /// It lands settled, in one batch: one version, and no flag shown raised on the way.
    @Test func aDeepLinkSettlesWhatItSaysIsUnderWay() async throws {
        var counter = try await Harness("counter")
        // What `PUT /state` does: `replaceState`, which settles, and starts what settling continues.
        let linked = try await counter.session.replaceState(json(#"{"count":3,"factIsLoading":true}"#))
        #expect(linked.version == 1, "the replacement and its settling are one batch")
        #expect(linked.events.map(\.data) == [json(#"{"feature":"root","changes":{"count":3}}"#)])
        #expect(await counter.state()["factIsLoading"] == false)
        let nothing = try await counter.session.replaceState(json(#"{"count":3,"factIsLoading":true}"#))
        #expect(nothing.version == 1 && nothing.events.isEmpty, "settled, it changes nothing: no batch at all")
        try await counter.sync()

        // Features the link brings on screen settle in the same batch as those already there.
        var app = try await Harness("app", state: json(#"{"path":[{"counter":{}}]}"#))
        let linkedFrom = await app.session.describe().version
        let pushed = try await app.session.replaceState(json(#"{"path":[{"counter":{"factIsLoading":true}},{"counter":{"factIsLoading":true,"count":5}}]}"#))
        #expect(pushed.version == linkedFrom + 1)
        #expect(pushed.events.map(\.kind) == [.push], "\(pushed.events.map(\.data))")
        #expect(pushed.events.first?.data["state"] == json(#"{"count":5,"factIsLoading":false}"#))
        try await app.sync()

        let now = Mutex(1_000.0)
        var gallery = try await Harness("gallery", dependencies: FeatureDependencies(
            factClient: InstantFacts(), alertDismissDelay: .seconds(10), wallClock: { now.withLock { $0 } }))
        let timed = try await gallery.session.replaceState(json(#"{"timedAlert":{"id":1,"dismissesAt":1000.3}}"#))
        #expect(timed.events.map(\.kind) == [.present], "the alert stays up until its timer fires")
        #expect(await gallery.presentation("timedAlert") != nil)
        let started = ContinuousClock.now
        while await gallery.presentation("timedAlert") != nil && ContinuousClock.now - started < .seconds(5) {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(await gallery.presentation("timedAlert") == nil, "dismissed by the timer the link started, after the time it gave, not the whole 10 s")
        try await gallery.sync()

        let before = await gallery.session.describe().version
        let untimed = try await gallery.session.replaceState(json(#"{"timedAlert":{"id":2}}"#))
        #expect(untimed.version == before + 1, "nothing to settle: no batch of its own")
        try await Task.sleep(for: .milliseconds(300))
        #expect(await gallery.presentation("timedAlert") != nil)
        try await gallery.sync()

        // An alert past its deadline goes as the link lands: the one on screen in the link's own
        // batch, and one the session does not show is no change at all.
        let pastDue = try await gallery.session.replaceState(json(#"{"timedAlert":{"id":2,"dismissesAt":999}}"#))
        #expect(pastDue.events.map(\.kind) == [.dismiss] && pastDue.version == before + 2, "\(pastDue.events.map(\.data))")
        let gone = try await gallery.session.replaceState(json(#"{"timedAlert":{"id":3,"dismissesAt":999}}"#))
        #expect(gone.events.isEmpty && gone.version == before + 2, "\(gone.events.map(\.data))")
        try await gallery.sync()
    }

    /// While an effect runs, a raised flag may be its work: a deep link then leaves it up, and
    /// the effect lowers it when it ends.
    @Test func aDeepLinkLeavesAFlagUpWhileAnEffectRuns() async throws {
        let facts = HeldFacts()
        var counter = try await Harness("counter", dependencies: Harness.dependencies(facts: facts))
        let fetching = try await counter.session.perform(target: "root", action: "factButtonTapped", arguments: nil)
        _ = try await counter.session.replaceState(json(#"{"count":5,"factIsLoading":true}"#))
        #expect(try await counter.session.settleEffects().events.isEmpty)
        #expect(await counter.state()["factIsLoading"] == true)
        facts.release()
        _ = await counter.session.waitForEffects(of: fetching, timeout: .seconds(5))
        #expect(await counter.state()["factIsLoading"] == false)
        try await counter.sync()
    }

    /// A deep link that lowers the spinner while a fetch runs says no fact is coming: the
    /// fetch's answer, about the same number, is dropped rather than shown out of nowhere.
    @Test func aDeepLinkThatLowersTheSpinnerDropsTheFetchsAnswer() async throws {
        let facts = HeldFacts()
        var counter = try await Harness("counter", dependencies: Harness.dependencies(facts: facts))
        let fetching = try await counter.session.perform(target: "root", action: "factButtonTapped", arguments: nil)
        _ = try await counter.session.replaceState(json(#"{"count":0}"#))
        #expect(await counter.state()["factIsLoading"] == false)
        facts.release()
        let ended = await counter.session.waitForEffects(of: fetching, timeout: .seconds(5))
        #expect(!ended.effectsPending)
        #expect(await counter.state()["destination"] == .null)
        #expect(await counter.presentation("destination.fact") == nil)
        try await counter.sync()
    }

    @Test func badActionsAndBindingsAreTypedErrorsThatChangeNothing() async throws {
        let wifi = try await Harness("wifi")
        let before = await wifi.session.describe()
        let path = JSONPath("args")
        let cases: [(NavigationError, () async throws -> Void)] = [
            (.unknownAction(feature: "wifi", action: "fly"), { _ = try await wifi.session.perform(target: "root", action: "fly", arguments: nil) }),
            (.invalidArgument(StateError(path.appending("network"), "missing argument of type string")),
             { _ = try await wifi.session.perform(target: "root", action: "networkTapped", arguments: [:]) }),
            (.invalidArgument(StateError(path.appending("network"), "expected a string, found number")),
             { _ = try await wifi.session.perform(target: "root", action: "networkTapped", arguments: ["network": 3]) }),
            (.invalidArgument(StateError(path.appending("network"), #"no network with id "zz" was found"#)),
             { _ = try await wifi.session.perform(target: "root", action: "networkTapped", arguments: ["network": "zz"]) }),
            (.invalidArgument(StateError(path.appending("extra"), "unknown argument for refreshNetworks")),
             { _ = try await wifi.session.perform(target: "root", action: "refreshNetworks", arguments: ["extra": 1]) }),
            (.unknownBinding(feature: "wifi", name: "volume"), { _ = try await wifi.session.bind(target: "root", field: "volume", value: 1) }),
            (.readOnlyBinding(feature: "wifi", name: "selectedNetworkID"), { _ = try await wifi.session.bind(target: "root", field: "selectedNetworkID", value: "n1") }),
            (.invalidArgument(StateError(JSONPath("value"), "expected a boolean, found string")),
             { _ = try await wifi.session.bind(target: "root", field: "isOn", value: "off") }),
            (.notOnScreen(kind: "feature", id: "p42"), { _ = try await wifi.session.perform(target: "p42", action: "refreshNetworks", arguments: nil) }),
        ]
        for (expected, attempt) in cases {
            await #expect(throws: expected) { try await attempt() }
        }
        let after = await wifi.session.describe()
        #expect(after.version == before.version)
        #expect(after.state == before.state)
    }
}
