import DemoHost
import Foundation
@testable import NavServer
import NavigationCore
import Testing
import TestSupport

/// One session tapping away must not starve the others: fetches in flight are capped per
/// session and in total, and a fetch over a cap is an alert that says so.
@Suite struct FactLimitTests {
    @Test func aSessionRunsAtMostItsShareOfFetches() async throws {
        let slow = try FactStub(.drip(interval: .milliseconds(200)))
        defer { slow.stop() }
        let server = try await TestServer(demo: {
            $0.factBaseURL = slow.baseURL
            $0.factTimeout = .seconds(30)
            $0.factMaxPerSession = 2
        })
        let (id, token) = try await server.session("app", state: #"{"path":[{"counter":{}},{"counter":{}},{"counter":{"count":3}}]}"#)
        let client = try server.client()
        let tree = try await client.get("/sessions/\(id)/navigation", token: token).json
        let counters = tree["stacks"]?[0]?["elements"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        try #require(counters.count == 3)
        for counter in counters.prefix(2) {
            #expect(try await client.act(id, token: token, "factButtonTapped", target: counter).status == 200)
        }
        #expect(await eventually(within: .seconds(20)) { slow.requestedPaths.count == 2 })

        let refused = try await client.act(id, token: token, "factButtonTapped", target: counters[2], query: "?wait=true")
        #expect(refused.status == 200)
        let navigation = try await client.get("/sessions/\(id)/navigation", token: token).json
        let elements = navigation["stacks"]?[0]?["elements"]?.arrayValue ?? []
        let alert = try #require(elements.last?["presentations"]?[0])
        #expect(alert["slot"] == "destination.alert")
        #expect(alert["alert"]?["message"] == "This session already has 2 fact requests running; wait for one to finish.")
        #expect(elements.map { $0["state"]?["factIsLoading"] } == [true, true, false])
        #expect(slow.requestedPaths.count == 2)

        // Another session still gets its fetch.
        let (other, otherToken) = try await server.session("counter")
        #expect(try await client.act(other, token: otherToken, "factButtonTapped").status == 200)
        #expect(await eventually(within: .seconds(20)) { slow.requestedPaths.count == 3 })
        await server.stop()
        // Ending the sessions stopped their transfers.
        #expect(await eventually(within: .seconds(20)) { slow.openConnections == 0 })
    }

    @Test func overTheServersCapAFetchIsRefusedWithAnAlert() async throws {
        let slow = try FactStub(.drip(interval: .milliseconds(200)))
        defer { slow.stop() }
        let server = try await TestServer(demo: {
            $0.factBaseURL = slow.baseURL
            $0.factTimeout = .seconds(30)
            $0.factMaxInFlight = 2
        })
        var sessions: [(id: String, token: String)] = []
        for _ in 0..<2 { sessions.append(try await server.session("counter")) }
        // Connected once there is something to send: a connection that sends nothing for the
        // header timeout (10 s) is closed, and a loaded machine can take that long to make two.
        let client = try server.client()
        for (id, token) in sessions {
            #expect(try await client.act(id, token: token, "factButtonTapped").status == 200)
        }
        #expect(await eventually(within: .seconds(20)) { slow.requestedPaths.count == 2 })

        let (id, token) = try await server.session("counter")
        let refused = try await client.act(id, token: token, "factButtonTapped", query: "?wait=true")
        // Refused before anything is sent: the alert comes in the tap's own transaction, and the
        // spinner never shows.
        let kinds = refused.json["events"]?.arrayValue?.compactMap { $0["event"]?.stringValue }
        #expect(kinds == ["present"])
        let navigation = try await client.get("/sessions/\(id)/navigation", token: token).json
        #expect(navigation["state"]?["factIsLoading"] == false)
        let alert = try #require(presentation("destination.alert", in: navigation))
        #expect(alert["alert"]?["message"] == "Too many fact requests are running on the server; try again in a moment.")
        #expect(slow.requestedPaths.count == 2)
        let metrics = try await client.request("GET", "/metrics").text
        #expect(metrics.contains(#"navd_fact_fetches_total{outcome="busy"} 1"#))
        await server.stop()
        #expect(await eventually(within: .seconds(20)) { slow.openConnections == 0 })
    }

    @Test func theCapsAreFlagsAndEnvironmentVariables() throws {
        func parse(_ arguments: [String], _ environment: [String: String]) throws -> DemoSettings {
            var settings = DemoSettings()
            _ = try ServerConfiguration.parse(arguments: arguments, environment: environment, settings: &settings, options: DemoSettings.options)
            return settings
        }
        let defaults = try parse([], [:])
        #expect((defaults.factMaxInFlight, defaults.factMaxPerSession) == (64, 2))
        let set = try parse(["--fact-max-in-flight", "8"], ["FACT_MAX_PER_SESSION": "1"])
        #expect((set.factMaxInFlight, set.factMaxPerSession) == (8, 1))
        #expect(throws: ServerConfiguration.Invalid.self) { try parse(["--fact-max-in-flight", "0"], [:]) }
        #expect(throws: ServerConfiguration.Invalid.self) { try parse([], ["FACT_MAX_PER_SESSION": "x"]) }
    }
}
