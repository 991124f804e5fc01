import Foundation
@testable import NavServer
import NavigationCore
import SessionStorage
import SQLiteStorage
import Testing
import TestSupport

/// What hostile testing found: ordering, bounds on memory, and the contract's finer points.
@Suite(.serialized) struct HardeningTests {
    /// API.md: during shutdown a mutation gets 503 `shutting_down`, not 404 for a session the
    /// shutdown just ended; and nothing follows `end`, not even what cancelled effects undo.
    @Test func duringShutdownMutationsGet503AndNothingFollowsEnd() async throws {
        let silent = try FactStub(.silent)
        defer { silent.stop() }
        let server = try await TestServer(demo: { $0.factBaseURL = silent.baseURL; $0.factTimeout = .seconds(30) })
        let (id, token) = try await server.session("counter")
        let headers = [("Authorization", "Bearer \(token)"), ("Content-Type", "application/json")]
        // A fetch that never finishes keeps a request in flight, so the shutdown waits for it; a
        // mutation pipelined behind it is handled only once it is answered, during the shutdown.
        let waiting = try server.client()
        try await waiting.send(LoopbackClient.format("POST", "/sessions/\(id)/actions?wait=true", headers: headers,
                                                     body: Array(#"{"action":"factButtonTapped"}"#.utf8))
                               + LoopbackClient.format("POST", "/sessions/\(id)/actions", headers: headers,
                                                       body: Array(#"{"action":"incrementButtonTapped"}"#.utf8)))
        try await Task.sleep(for: .milliseconds(200))
        let stopping = Task { await server.server.shutdown(within: .seconds(3)) }
        let first = try await waiting.readResponse()
        #expect(first.status == 200)
        let kinds = first.json["events"]?.arrayValue?.compactMap { $0["event"]?.stringValue } ?? []
        #expect(kinds.last == "end", "\(kinds): nothing after end")
        if let second = try? await waiting.readResponse() {
            #expect(second.status == 503)
            #expect(second.json["error"]?["code"] == "shutting_down")
        }
        await stopping.value
        server.facts.stop()
    }

    @Test func pipelinedMutationsTakeEffectInTheOrderSent() async throws {
        let server = try await TestServer()
        // Other connections keep the sessions' executors and the loops busy meanwhile.
        let load = (0..<3).map { _ in
            Task {
                let (id, token) = try await server.session("counter")
                let client = try server.client()
                while !Task.isCancelled { _ = try await client.act(id, token: token, "incrementButtonTapped") }
            }
        }
        for _ in 0..<24 {
            let (id, token) = try await server.session("counter")
            let client = try server.client()
            var pipelined: [UInt8] = []
            for version in 0..<32 {
                pipelined += LoopbackClient.format("POST", "/sessions/\(id)/actions", headers: [
                    ("Authorization", "Bearer \(token)"), ("Content-Type", "application/json"), ("If-Match", "\"\(version)\""),
                ], body: Array(#"{"action":"incrementButtonTapped"}"#.utf8))
            }
            try await client.send(pipelined)
            for version in 1...32 {
                let response = try await client.readResponse()
                #expect(response.status == 200, "\(response.text)")
                #expect(response.json["version"] == .int(version))
            }
        }
        for task in load { task.cancel() }
        await server.stop()
    }

    @Test func aClientThatDoesNotReadItsAnswersGetsNoMoreWorkDone() async throws {
        let server = try await TestServer { $0.sessionLimits.maxStringBytes = 1 << 20 }
        let text = String(repeating: "t", count: 900_000)
        let (id, token) = try await server.session("gallery", state: #"{"text":"\#(text)"}"#)
        let auth = ("Authorization", "Bearer \(token)")
        let reader = try server.client(timeoutSeconds: 30)
        var pipelined: [UInt8] = []
        for _ in 0..<24 { pipelined += LoopbackClient.format("GET", "/sessions/\(id)", headers: [auth]) }
        pipelined += LoopbackClient.format("PUT", "/sessions/\(id)/state", headers: [auth, ("Content-Type", "application/json")],
                                           body: Array(#"{"state":{"text":"done"}}"#.utf8))
        try await reader.send(pipelined)
        try await Task.sleep(for: .seconds(1))
        // Far more than the socket buffers hold is waiting: the change at the end has not run.
        #expect(try await server.client().get("/sessions/\(id)", token: token).json["state"]?["text"] == .string(text))
        for _ in 0..<24 { #expect(try await reader.readResponse().status == 200) }
        #expect(try await reader.readResponse().status == 200)
        #expect(try await server.client().get("/sessions/\(id)", token: token).json["state"]?["text"] == "done")
        await server.stop()
    }

    /// `--max-state-bytes` bounds a session as a whole: its creation and a binding past it are
    /// refused with 422 and change nothing.
    @Test func aSessionsStateIsBoundedInBytes() async throws {
        #expect(try ServerConfiguration.parse(arguments: ["--max-state-bytes", "5000"], environment: [:]).sessionLimits.maxStateBytes == 5000)
        #expect(try ServerConfiguration.parse(arguments: [], environment: ["NAVD_MAX_STATE_BYTES": "6000"]).sessionLimits.maxStateBytes == 6000)
        #expect(try ServerConfiguration.parse(arguments: [], environment: [:]).sessionLimits.maxStateBytes == 4 << 20)
        #expect(throws: ServerConfiguration.Invalid.self) { try ServerConfiguration.parse(arguments: ["--max-state-bytes", "10"], environment: [:]) }
        let server = try await TestServer { $0.sessionLimits.maxStateBytes = 4096 }
        let client = try server.client()
        let big = String(repeating: "b", count: 5000)
        let refused = try await client.request("POST", "/sessions", json: #"{"feature":"gallery","state":{"text":"\#(big)"}}"#)
        #expect(refused.status == 422 && refused.json["error"]?["code"] == "state_too_large", "\(refused.text)")
        let (id, token) = try await server.session("gallery", state: #"{"text":"small"}"#)
        let editor = try #require(try await client.get("/sessions/\(id)/navigation", token: token).json["presentations"]?[0]?["id"]?.stringValue)
        let grown = try await client.request("PUT", "/sessions/\(id)/features/\(editor)/bindings/text", token: token, json: #""\#(big)""#)
        #expect(grown.status == 422 && grown.json["error"]?["code"] == "state_too_large", "\(grown.text)")
        let session = try await client.get("/sessions/\(id)", token: token).json
        #expect(session["state"]?["text"] == "small" && session["version"] == 0)
        let fits = try await client.request("PUT", "/sessions/\(id)/features/\(editor)/bindings/text", token: token, json: #""fits""#)
        #expect(fits.status == 200)
        await server.stop()
    }

    @Test func popWithoutABodyPopsOneAndTooManyIsInvalid() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("app", state: #"{"path":[{"counter":{}},{"settings":{}}]}"#)
        let client = try server.client()
        let tree = try await client.get("/sessions/\(id)/navigation", token: token).json
        let stack = try #require(tree["stacks"]?[0]?["id"]?.stringValue)
        let top = try #require(tree["stacks"]?[0]?["elements"]?[1]?["id"]?.stringValue)
        let tooMany = try await client.request("POST", "/sessions/\(id)/stacks/\(stack)/pop", token: token, json: #"{"count":3}"#)
        #expect(tooMany.status == 422 && tooMany.json["error"]?["code"] == "invalid_pop")
        // Integers past a 64-bit count are too many too, not a body of the wrong type; a
        // fraction is the wrong type.
        for count in ["9223372036854775808", "-9223372036854775809", "1180591620717411303424"] {
            let huge = try await client.request("POST", "/sessions/\(id)/stacks/\(stack)/pop", token: token, json: #"{"count":\#(count)}"#)
            #expect(huge.status == 422 && huge.json["error"]?["code"] == "invalid_pop", "\(count): \(huge.text)")
        }
        let fraction = try await client.request("POST", "/sessions/\(id)/stacks/\(stack)/pop", token: token, json: #"{"count":1.5}"#)
        #expect(fraction.status == 422 && fraction.json["error"]?["code"] == "invalid_request", "\(fraction.text)")
        let back = try await client.request("POST", "/sessions/\(id)/stacks/\(stack)/pop", headers: [("Authorization", "Bearer \(token)")])
        #expect(back.status == 200)
        #expect(back.json["events"]?[0]?["data"] == json(#"{"stack":"\#(stack)","ids":["\#(top)"],"origin":"client"}"#))
        #expect(back.json["version"] == 1)
        // Back once more, then once too many: an empty stack says so.
        #expect(try await client.request("POST", "/sessions/\(id)/stacks/\(stack)/pop", token: token, json: "{}").status == 200)
        let empty = try await client.request("POST", "/sessions/\(id)/stacks/\(stack)/pop", token: token, json: "{}")
        #expect(empty.status == 422 && empty.json["error"]?["code"] == "invalid_pop")
        #expect(empty.json["error"]?["message"]?.stringValue?.contains("is empty") == true, "\(empty.text)")
        await server.stop()
    }

    @Test func stateBeyondTheLimitsIsRefusedWith422AndNamesThePath() async throws {
        let server = try await TestServer()
        let client = try server.client()
        let elements = Array(repeating: #"{"settings":{}}"#, count: 1001).joined(separator: ",")
        let tooLong = try await client.request("POST", "/sessions", json: #"{"feature":"app","state":{"path":[\#(elements)]}}"#)
        #expect(tooLong.status == 422)
        #expect(tooLong.json["error"]?["code"] == "state_too_large")
        #expect(tooLong.json["error"]?["message"]?.stringValue?.hasPrefix("state.path:") == true)
        let string = String(repeating: "s", count: 70_000)
        let (id, token) = try await server.session("gallery")
        let put = try await client.request("PUT", "/sessions/\(id)/state", token: token, json: #"{"state":{"text":"\#(string)"}}"#)
        #expect(put.status == 422 && put.json["error"]?["code"] == "state_too_large")
        #expect(try await client.get("/sessions/\(id)", token: token).json["version"] == 0)
        await server.stop()
    }

    /// A path is split on its slashes before it is decoded: an encoded slash is part of an id,
    /// never a separator that reaches another endpoint; other escapes mean what they encode.
    @Test func anEncodedSlashStaysInsideItsSegment() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        let navigation = try await client.get("/sessions/\(id)/navigation", token: token)
        #expect(navigation.status == 200)
        let slashed = try await client.get("/sessions/\(id)%2Fnavigation", token: token)
        #expect(slashed.status == 404, "\(slashed.text)")
        #expect(slashed.json["error"]?["code"] == "session_not_found")
        let escaped = try await client.get("/%73essions/\(id)/navigatio%6E", token: token)
        #expect(escaped.status == 200)
        #expect(escaped.json == navigation.json)
        await server.stop()
    }

    /// An error quotes what was sent, cut short: a large unknown name does not come back whole.
    @Test func errorMessagesQuoteTheirInputCutShort() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        // Plain letters, and one character of a hundred thousand combining accents.
        for name in [String(repeating: "x", count: 200_000), "a" + String(repeating: "\u{301}", count: 100_000)] {
            let response = try await client.act(id, token: token, name)
            #expect(response.status == 422)
            let message = try #require(response.json["error"]?["message"]?.stringValue)
            #expect(message.unicodeScalars.count <= APIError.maxMessageScalars + 1 && message.hasSuffix("…"))
            #expect(response.body.count < 5_000)
        }
        await server.stop()
    }

    /// A request with two `Authorization` fields opens nothing, even when both hold the token.
    @Test func twoCredentialsOpenNothing() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        for pair in [(token, token), (token, "other"), ("other", token)] {
            let response = try await client.request("GET", "/sessions/\(id)", headers: [
                ("Authorization", "Bearer \(pair.0)"), ("Authorization", "Bearer \(pair.1)"),
            ])
            #expect(response.status == 401, "\(pair)")
        }
        #expect(try await client.get("/sessions/\(id)", token: token).status == 200)
        await server.stop()
    }

    /// A state accepted with 2xx survives a restart, however deep: the tree stored for it nests
    /// about twice as deep as the request that built it, and a restart must read it back. Past
    /// the nesting bound a state is refused with 422 and nothing is created.
    @Test func theDeepestStateAcceptedSurvivesARestart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("navd-deep-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let retention = EventRetention(count: 1024, bytes: 1 << 20)
        func nested(_ levels: Int) -> String {
            var value = #"{"level":\#(levels)}"#
            for level in stride(from: levels - 1, through: 1, by: -1) { value = #"{"level":\#(level),"child":\#(value)}"# }
            return #"{"feature":"gallery","state":{"nested":\#(value)}}"#
        }
        let deepest = SessionLimits().maxDepth - 1
        let store = try SQLiteSessionStore(directory: directory, retention: retention)
        let server = try await TestServer(storage: store)
        let client = try server.client()
        let refused = try await client.request("POST", "/sessions", json: nested(deepest + 1))
        #expect(refused.status == 422 && refused.json["error"]?["code"] == "state_too_large", "\(refused.text.prefix(300))")
        let created = try await client.request("POST", "/sessions", json: nested(deepest))
        #expect(created.status == 201)
        let id = try #require(created.json["id"]?.stringValue)
        let token = try #require(created.json["token"]?.stringValue)
        // Later transactions of the deep session, and a snapshot of it, are stored as well.
        for round in 0..<70 {
            let bound = try await client.request("PUT", "/sessions/\(id)/features/root/bindings/alertIsPresented", token: token,
                                                 json: round % 2 == 0 ? "true" : "false")
            #expect(bound.status == 200, "\(bound.text.prefix(300))")
        }
        let before = try await client.get("/sessions/\(id)", token: token)
        #expect(before.status == 200)
        await server.stop()
        store.close()

        let reopened = try SQLiteSessionStore(directory: directory, retention: retention)
        let restarted = try await TestServer(storage: reopened)
        let after = try await restarted.client().get("/sessions/\(id)", token: token)
        #expect(after.status == 200, "\(after.text.prefix(300))")
        #expect(after.json["navigation"] == before.json["navigation"])
        #expect(after.json["state"] == before.json["state"])
        await restarted.stop()
        reopened.close()
    }
}
