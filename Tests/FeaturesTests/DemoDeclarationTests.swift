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
        let wifi = try await Harness("wifi", state: json(#"{"destination":{"connect":{"network":\#(network),"isConnecting":true}}}"#))
        let sheet = try #require(await wifi.presentation("destination.connect"))
        let settled = try await wifi.session.settleEffects()
        #expect(settled.events.map(\.data) == [json(#"{"feature":"\#(sheet)","changes":{"isConnecting":false}}"#)])
        #expect(await wifi.presentation("destination.connect") == sheet)
        #expect(await wifi.presentation("incorrectPasswordAlertIsPresented", of: sheet) == nil)
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
