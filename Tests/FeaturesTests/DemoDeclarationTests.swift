import Features
import Foundation
@testable import NavigationCore
import Testing
import TestSupport

/// What the demo declarations promise that the flows do not exercise: the join sheet's Settle and the
/// gallery's typed `style` argument.
@Suite struct DemoDeclarationTests {
    /// A join cut off by a restart is over: the spinner goes down, the sheet stays where it was.
    @Test func aJoinCutOffByARestartLowersItsSpinnerAndKeepsTheSheet() async throws {
        let network = #"{"id":"n1","name":"Blob's Home","isSecured":true,"connectivity":1}"#
        let wifi = try await Harness("wifi", state: json(#"{"destination":{"connect":{"network":\#(network)}}}"#),
                                     dependencies: Harness.dependencies(delay: .seconds(600)))
        let sheet = try #require(await wifi.presentation("destination.connect"))
        let journal = MemoryJournal()
        let first = await wifi.session.makeDurable(journal: journal)
        _ = try await wifi.session.durable(try await wifi.session.perform(target: sheet, action: "joinButtonTapped", arguments: nil))
        let crashed = try journal.restored(from: first)
        #expect(crashed.state["destination"]?["connect"]?["isConnecting"] == true, "the journal holds the join's spinner")

        let restored = try wifi.catalog.restoreSession(feature: "wifi", crashed, events: [], journal: MemoryJournal())
        let settled = try await restored.settleEffects()
        #expect(settled.events.map(\.data) == [json(#"{"feature":"\#(sheet)","changes":{"isConnecting":false}}"#)])
        let tree = await restored.navigation()
        #expect(tree["presentations"]?[0]?["id"]?.stringValue == sheet, "the same sheet")
        #expect(tree["presentations"]?[0]?["presentations"]?.arrayValue?.isEmpty == true, "no alert: the join did not fail, it ended")
        await wifi.session.end(.deleted)
        await restored.end(.deleted)

        // A deep link that says a join is under way starts none: it lands with the spinner down.
        let linked = try await Harness("wifi", state: json(#"{"destination":{"connect":{"network":\#(network),"isConnecting":true}}}"#))
        #expect(await linked.state()["destination"]?["connect"]?["isConnecting"] == false)
        #expect(await linked.session.describe().version == 0)
        #expect(try await linked.session.settleEffects().events.isEmpty)
    }

    /// `style` is decoded before the action runs: an unknown style or a wrong type is refused with
    /// its path and the allowed names, and nothing changes.
    @Test func aGalleryStyleArgumentIsCheckedBeforeTheActionRuns() async throws {
        let gallery = try await Harness("gallery")
        let before = await gallery.session.describe()
        let refusal = NavigationError.invalidArgument(StateError(JSONPath("args").appending("style"),
            "expected one of alert, confirmationDialog, sheet, popover, fullScreenCover, drillDown"))
        for action in ["isPresentedButtonTapped", "itemButtonTapped", "destinationButtonTapped"] {
            for bad: JSON in ["bogus", 1] {
                await #expect(throws: refusal) {
                    _ = try await gallery.session.perform(target: "root", action: action, arguments: ["style": bad])
                }
            }
            await #expect(throws: NavigationError.invalidArgument(StateError(JSONPath("args").appending("style"), "missing argument of type string"))) {
                _ = try await gallery.session.perform(target: "root", action: action, arguments: [:])
            }
        }
        #expect(await gallery.session.describe().version == before.version)
    }
}
