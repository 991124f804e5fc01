import Features
@testable import NavigationCore
import Testing

@Suite struct StateEncodingTests {
    let catalog = FeatureSet.catalog(Harness.dependencies())

    @Test(arguments: [
        ("app", #"{"path":[{"counter":{"count":1,"factIsLoading":false,"destination":{"settings":{"isOn":true}}}},{"settings":{"isOn":false}}]}"#),
        ("counter", #"{"count":-3,"factIsLoading":false,"destination":{"alert":{"message":"boom"}}}"#),
        ("wifi", #"{"foundNetworks":[{"id":"a","name":"A","isSecured":true,"connectivity":0.5}],"isOn":true,"selectedNetworkID":null,"destination":{"connect":{"network":{"id":"a","name":"A","isSecured":true,"connectivity":0.5},"password":"pw","isConnecting":false,"incorrectPasswordAlertIsPresented":true}}}"#),
        ("gallery", #"{"nested":{"level":1,"child":{"level":2,"child":null}},"text":"hi","sheetItem":{"id":"x","title":"X"},"alertIsPresented":true}"#),
    ])
    func encodeOfDecodeIsIdentity(_ feature: String, _ text: String) async throws {
        let state = json(text)
        let session = try catalog.makeSession(feature: feature, state: state)
        let encoded = await session.describe().state
        // Fields the input left out took their defaults; everything it gave comes back unchanged.
        for pair in state.objectValue?.pairs ?? [] { #expect(encoded[pair.key] == pair.value, "\(pair.key)") }
        let again = try catalog.makeSession(feature: feature, state: encoded)
        #expect(await again.describe().state == encoded)
    }

    @Test func aPartialStateTakesDefaults() async throws {
        let session = try catalog.makeSession(feature: "counter", state: ["count": 5])
        #expect(await session.describe().state == json(#"{"count":5,"factIsLoading":false,"destination":null}"#))
        let wifi = try catalog.makeSession(feature: "wifi", state: [:])
        #expect(await wifi.describe().state["foundNetworks"]?.arrayValue?.count == Network.seeded.count)
    }

    @Test(arguments: [
        ("app", #"{"path":[{"counter":{}},{"settings":{}},{"counter":{"count":"x"}}]}"#, "state.path[2].counter.count", "expected an integer, found string"),
        ("app", #"{"path":[{"wifi":{}}]}"#, "state.path[0].wifi", "unknown case; expected one of counter, settings"),
        ("app", #"{"path":[{"counter":{},"settings":{}}]}"#, "state.path[0]", "expected exactly one of the keys counter, settings"),
        ("counter", #"{"colour":"red"}"#, "state.colour", "unknown field of counter"),
        ("counter", #"{"destination":{"fact":{"value":1}}}"#, "state.destination.fact.value", "expected a string, found number"),
        ("wifi", #"{"foundNetworks":[{"connectivity":2}]}"#, "state.foundNetworks[0].connectivity", "must be between 0.0 and 1.0"),
        ("counter", #"[1]"#, "state", "expected an object (counter state), found array"),
    ])
    func invalidStatesNameThePathAtFault(_ feature: String, _ text: String, _ path: String, _ reason: String) {
        #expect(throws: NavigationError.invalidState(StateError(JSONPath(path), reason))) {
            try catalog.makeSession(feature: feature, state: json(text))
        }
    }

    @Test func anUnknownFeatureIsRefused() {
        #expect(throws: NavigationError.unknownFeature("chess")) { try catalog.makeSession(feature: "chess", state: nil) }
    }

    /// A screen shown only inside another is listed by `GET /features`, so "unknown" misled: the
    /// refusal says it cannot start a session, with the same code.
    @Test func aFeatureShownOnlyInsideAnotherIsRefusedAsSuch() {
        #expect(throws: NavigationError.notHostable("fact")) { try catalog.makeSession(feature: "fact", state: nil) }
        #expect(NavigationError.notHostable("fact").code == "unknown_feature")
        #expect(NavigationError.notHostable("fact").message.contains("hostable: false"))
    }

    @Test func theCatalogDescribesActionsBindingsAndSlots() throws {
        let features = try #require(catalog.description["features"]?.arrayValue)
        let wifi = try #require(features.first { $0["name"] == "wifi" })
        #expect(wifi["hostable"] == true)
        #expect(wifi["bindings"] == ["isOn"])
        #expect(wifi["actions"]?.arrayValue?.first { $0["name"] == "networkTapped" }?["arguments"] == json(#"[{"name":"network","type":"string"}]"#))
        #expect(wifi["presentations"] == json(#"[{"slot":"destination.connect","style":"sheet","feature":"connect"},{"slot":"destination.detail","style":"drillDown","feature":"detail"}]"#))
        let app = try #require(features.first { $0["name"] == "app" })
        #expect(app["stacks"] == json(#"[{"slot":"path","accepts":["counter","settings"]}]"#))
        let detail = try #require(features.first { $0["name"] == "detail" })
        #expect(detail["hostable"] == false)
    }
}
