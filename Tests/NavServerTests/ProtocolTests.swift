import Foundation
@testable import NavServer
import NavigationCore
import SQLiteStorage
import Testing
import TestSupport

/// HTTP/1.1 as navd speaks it, and what hostile clients cannot do to it.
@Suite(.serialized) struct ProtocolTests {
    @Test func keepAliveAndPipelinedRequestsAreAnsweredInOrder() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        var pipelined: [UInt8] = []
        for _ in 0..<3 {
            pipelined += LoopbackClient.format("POST", "/sessions/\(id)/actions", headers: [
                ("Authorization", "Bearer \(token)"), ("Content-Type", "application/json"),
            ], body: Array(#"{"action":"incrementButtonTapped"}"#.utf8))
        }
        pipelined += LoopbackClient.format("GET", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")])
        try await client.send(pipelined)
        var versions: [JSON?] = []
        for _ in 0..<3 { versions.append(try await client.readResponse().json["version"]) }
        #expect(versions == [1, 2, 3])
        #expect(try await client.readResponse().json["state"]?["count"] == 3)
        // Still open: keep-alive.
        #expect(try await client.request("GET", "/healthz").status == 200)
        let closing = try await client.request("GET", "/healthz", headers: [("Connection", "close")])
        #expect(closing.header("connection") == "close")
        #expect(await client.readUntilClosed())
        await server.stop()
    }

    @Test func chunkedBodies() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        let body = #"{"action":"incrementButtonTapped"}"#
        let (head, tail) = (String(body.prefix(10)), String(body.dropFirst(10)))
        let chunked = "\(String(head.utf8.count, radix: 16))\r\n\(head)\r\n\(String(tail.utf8.count, radix: 16))\r\n\(tail)\r\n0\r\n\r\n"
        let response = try await client.request("POST", "/sessions/\(id)/actions", headers: [
            ("Authorization", "Bearer \(token)"), ("Content-Type", "application/json"), ("Transfer-Encoding", "chunked"),
        ], body: Array(chunked.utf8))
        #expect(response.status == 200 && response.json["version"] == 1)
        await server.stop()
    }

    @Test func expectContinueWithTheRealCurl() async throws {
        let curl = "/usr/bin/curl"
        try #require(FileManager.default.isExecutableFile(atPath: curl), "curl is needed for this test")
        let server = try await TestServer()
        let (id, token) = try await server.session("wifi")
        // An upload (-T) over 1 KiB: curl sends Expect: 100-continue and waits for the interim response.
        let password = String(repeating: "p", count: 2000)
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("navd-body-\(UUID().uuidString).json")
        try Data(#""\#(password)""#.utf8).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        _ = try await server.client().act(id, token: token, "networkTapped", args: #"{"network":"n1"}"#)
        let tree = try await server.client().get("/sessions/\(id)/navigation", token: token).json
        let connect = try #require(presentation("destination.connect", in: tree)?["id"]?.stringValue)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: curl)
        process.arguments = ["-sS", "-v", "-X", "PUT", "--max-time", "5", "-H", "Content-Type: application/json",
                             "-H", "Authorization: Bearer \(token)", "-T", file.path,
                             "http://127.0.0.1:\(server.port)/sessions/\(id)/features/\(connect)/bindings/password"]
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let body = output.fileHandleForReading.readDataToEndOfFile()
        let trace = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(trace.contains("Expect: 100-continue"))
        #expect(trace.contains("HTTP/1.1 100 Continue"))
        let response = (try? JSONParser.parse(Array(body))) ?? .null
        #expect(response["events"]?[0]?["data"]?["changes"]?["password"]?.stringValue?.count == 2000)
        await server.stop()
    }

    /// A request that waits for `100 Continue` and could not succeed whatever its body is
    /// answered at once, so its body is never uploaded; nothing changes.
    @Test func expectContinueIsRefusedBeforeTheBodyWhenNoBodyCouldHelp() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let body = #"{"action":"incrementButtonTapped"}"#
        for (target, method, authorization, status) in [
            ("/sessions/\(id)/actions", "POST", "Bearer wrong", 401),
            ("/sessions/\(id)/actions", "POST", nil, 401),
            ("/sessions/\(String(repeating: "0", count: 32))/actions", "POST", "Bearer \(token)", 404),
            ("/sessions/\(id)/nowhere", "POST", "Bearer \(token)", 404),
            ("/sessions/\(id)/actions", "PUT", "Bearer \(token)", 405),
            ("/sessions/\(id)/actions?wait=1&wait=1", "POST", "Bearer \(token)", 400),
        ] {
            let client = try server.client()
            var headers = [("Expect", "100-continue"), ("Content-Type", "application/json"), ("Content-Length", "\(body.utf8.count)")]
            if let authorization { headers.append(("Authorization", authorization)) }
            try await client.send(LoopbackClient.format(method, target, headers: headers))
            // Only the head was sent: an answer that waited for the body would never come.
            let response = try await client.readResponse()
            #expect(response.status == status, "\(method) \(target): \(response.text)")
            #expect(response.header("x-request-id") != nil)
        }
        #expect(try await server.client().get("/sessions/\(id)", token: token).json["version"] == 0)
        await server.stop()
    }

    @Test func limitsAnswerWithTheirStatusAndAJSONError() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let cases: [([UInt8], Int)] = [
            (Array("GET /\(String(repeating: "a", count: 9000)) HTTP/1.1\r\nHost: x\r\n\r\n".utf8), 414),
            (Array("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "b", count: 17000))\r\n\r\n".utf8), 431),
            (Array("POST /sessions/\(id)/actions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\nContent-Length: 2000000\r\n\r\n".utf8), 413),
        ]
        for (bytes, status) in cases {
            let client = try server.client()
            try await client.send(bytes)
            let response = try await client.readResponse()
            #expect(response.status == status)
            #expect(response.json["error"]?["code"]?.stringValue?.isEmpty == false)
            #expect(await client.readUntilClosed())
        }
        await server.stop()
    }

    /// The head's deadline runs from the connection's start, however its bytes trickle in: a
    /// client sending a byte every 40 ms, whose head would take half a minute, is answered 408
    /// and cut off while it is still sending (a deadline reset by each byte would never answer).
    @Test func aSlowLorisIsCutOffWith408() async throws {
        let server = try await TestServer { $0.headerTimeout = .milliseconds(500) }
        let client = try server.client()
        let head = Array("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Padding: \(String(repeating: "a", count: 700))\r\n".utf8)
        var sent = 0
        while sent < head.count, try await !client.hasSomethingToRead() {
            guard (try? await client.send([head[sent]])) != nil else { break }
            sent += 1
            try await Task.sleep(for: .milliseconds(40))
        }
        #expect(sent < head.count, "answered while the head was still coming")
        let response = try await client.readResponse()
        #expect(response.status == 408)
        #expect(await client.readUntilClosed())
        await server.stop()
    }

    @Test func overMaxConnectionsIs503() async throws {
        let server = try await TestServer { $0.maxConnections = 2 }
        let held = try (0..<2).map { _ in try server.client() }
        _ = try await held[0].request("GET", "/healthz")
        let refused = try server.client()
        let response = try await refused.readResponse()
        #expect(response.status == 503)
        #expect(await refused.readUntilClosed())
        await server.stop()
    }

    @Test func overMaxSessionsIs503() async throws {
        let server = try await TestServer { $0.maxSessions = 1 }
        _ = try await server.session("counter")
        let response = try await server.client().request("POST", "/sessions", json: #"{"feature":"counter"}"#)
        #expect(response.status == 503 && response.json["error"]?["code"] == "over_capacity")
        await server.stop()
    }

    /// A restart with a lower `--max-sessions` than there are sessions brings back every one
    /// (each was acknowledged) and refuses new ones until fewer are live (found by an
    /// adversarial review: the ones past the limit answered 404, counted as recovered).
    @Test func aLowerMaxSessionsAtARestartKeepsEverySession() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("navd-limit-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func store() throws -> SQLiteSessionStore { try SQLiteSessionStore(directory: directory, retention: .init(count: 8, bytes: 1 << 20)) }
        let first = try store()
        var server = try await TestServer(storage: first)
        var sessions: [(id: String, token: String)] = []
        for _ in 0..<5 { sessions.append(try await server.session("counter")) }
        await server.stop()
        first.close()

        let second = try store()
        let log = LogCapture()
        server = try await TestServer(log: log, storage: second) { $0.maxSessions = 2 }
        for (id, token) in sessions {
            #expect(try await server.client().get("/sessions/\(id)", token: token).status == 200)
        }
        #expect(try await log.line { $0["event"] == "over_max_sessions" }["sessions"] == 5)
        let refused = try await server.client().request("POST", "/sessions", json: #"{"feature":"counter"}"#)
        #expect(refused.status == 503 && refused.json["error"]?["code"] == "over_capacity")
        for (id, token) in sessions.prefix(4) {
            #expect(try await server.client().request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")]).status == 204)
        }
        #expect(try await server.client().request("POST", "/sessions", json: #"{"feature":"counter"}"#).status == 201, "one live, room for one more")
        await server.stop()
        second.close()
    }

    @Test func aBurstOfHostileRequestsChangesNothing() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("app", state: #"{"path":[{"counter":{"count":3}}]}"#)
        let before = try await server.client().get("/sessions/\(id)", token: token).json
        let hostile: [[UInt8]] = [
            Array((0..<512).map { UInt8(truncatingIfNeeded: $0 &* 7919) }),
            Array("POST /sessions/\(id)/actions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{\"act".utf8),
            Array("GET /sessions/\(id) HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \u{FF}\r\n\r\n".utf8) + [0xC3, 0x28, 0x0D, 0x0A, 0x0D, 0x0A],
            Array("POST /sessions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n".utf8),
            Array("POST /sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n".utf8),
            Array("POST /sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabc".utf8),
            Array("GET / HTTP/9.9\r\n\r\n".utf8),
            Array("\r\n\r\n\r\n".utf8),
            Array("POST /sessions/\(id)/actions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\nContent-Length: 9\r\n\r\n{\"action\"".utf8),
            Array("POST /sessions/\(id)/state HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\nContent-Length: 14\r\n\r\n{\"state\":\u{FF}\u{FE}}".utf8),
            Array("GET /\(String(repeating: "%", count: 100)) HTTP/1.1\r\n\r\n".utf8),
            Array("POST /sessions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\nzz\r\n".utf8),
        ]
        for bytes in hostile {
            let client = try server.client()
            try? await client.send(bytes)
            // Whatever the answer, the server must not crash; half the time the client walks away.
            if bytes.count % 2 == 0 { _ = try? await client.readResponse() }
        }
        // A client that disconnects mid-body.
        do {
            let client = try server.client()
            try await client.send("POST /sessions/\(id)/actions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(token)\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"action\":\"incr")
        }
        let after = try await server.client().get("/sessions/\(id)", token: token).json
        #expect(after == before)
        #expect(try await server.client().request("GET", "/healthz").status == 200)
        _ = try await server.client().act(id, token: token, "incrementButtonTapped", target: after["navigation"]?["stacks"]?[0]?["elements"]?[0]?["id"]?.stringValue ?? "")
        #expect(try await server.client().get("/sessions/\(id)", token: token).json["state"]?["path"]?[0]?["counter"]?["count"] == 4)
        await server.stop()
    }
}
