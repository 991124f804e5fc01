import Foundation
import NavigationCore
import Testing
import TestSupport

/// SIGTERM against the real `navd`: bounded in time whatever the load, and, with
/// `--shutdown-grace`, out of rotation first while everything is still served.
@Suite(.serialized) struct ShutdownProcessTests {
    typealias Running = ProcessTests.Running
    static let flags = ["--port", "0", "--log-requests", "off", "--fact-base-url", "http://127.0.0.1:9"]

    /// A session whose every GET is about 1.8 MB to encode: 15 pushed counters showing 60 KB facts.
    static func heavySession(port: Int) async throws -> (id: String, token: String) {
        let fact = String(repeating: "y", count: 60_000)
        let path = (0..<15).map { _ in #"{"counter":{"destination":{"fact":{"value":"\#(fact)"}}}}"# }.joined(separator: ",")
        let created = try await LoopbackClient(port: port).request("POST", "/sessions", json: #"{"feature":"app","state":{"path":[\#(path)]}}"#)
        guard created.status == 201, let id = created.json["id"]?.stringValue, let token = created.json["token"]?.stringValue else {
            throw LoopbackClient.Failure(description: "create: \(created.status) \(created.text)")
        }
        return (id, token)
    }

    /// 200 connections each pipelining 32 large GETs and reading none of the answers: seconds of
    /// work queued on the session's executor when the signal comes.
    static func load(port: Int, id: String, token: String) async throws -> [LoopbackClient] {
        let one = LoopbackClient.format("GET", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")])
        let batch = Array([[UInt8]](repeating: one, count: 32).joined())
        var clients: [LoopbackClient] = []
        for _ in 0..<200 {
            let client = try LoopbackClient(port: port)
            try await client.send(batch)
            clients.append(client)
        }
        return clients
    }

    @Test(arguments: [0, 1])
    func sigtermUnderLoadExitsWithinFiveSecondsPlusTheGrace(grace: Int) async throws {
        let navd = try Running(Self.flags + (grace > 0 ? ["--shutdown-grace", String(grace)] : []))
        try navd.waitUntilListening()
        let (id, token) = try await Self.heavySession(port: navd.port)
        let clients = try await Self.load(port: navd.port, id: id, token: token)
        try await Task.sleep(for: .milliseconds(300))

        let signalled = ContinuousClock.now
        navd.process.terminate()
        let exited = await navd.wait(timeout: .seconds(grace + 10))
        let took = ContinuousClock.now - signalled
        #expect(exited)
        #expect(took < ProcessTests.Running.stretched(.seconds(grace + 5)), "SIGTERM under load took \(took)")
        #expect(took >= .seconds(grace), "the grace period was cut short: \(took)")
        #expect(navd.exitStatus == 0)
        withExtendedLifetime(clients) {}
    }

    @Test func duringTheGraceReadinessFailsWhileRequestsAndStreamsAreServedThenItDrains() async throws {
        let navd = try Running(Self.flags + ["--shutdown-grace", "2"])
        try navd.waitUntilListening()
        let client = try LoopbackClient(port: navd.port)
        let created = try await client.request("POST", "/sessions", json: #"{"feature":"counter"}"#)
        let id = try #require(created.json["id"]?.stringValue)
        let token = try #require(created.json["token"]?.stringValue)
        let stream = try LoopbackClient(port: navd.port)
        try await stream.send(LoopbackClient.format("GET", "/sessions/\(id)/events", headers: [("Authorization", "Bearer \(token)")]))
        _ = try await stream.readResponse()
        _ = try await stream.readEvents { $0.name == "snapshot" }
        #expect(try await client.request("GET", "/readyz").status == 200)

        let signalled = ContinuousClock.now
        navd.process.terminate()
        try await Task.sleep(for: .milliseconds(200))
        let ready = try await client.request("GET", "/readyz")
        #expect(ready.status == 503)
        #expect(ready.json["error"]?["code"] == "not_ready")
        // Everything else is served as before, on open connections and new ones alike.
        #expect(try await LoopbackClient(port: navd.port).request("GET", "/healthz").status == 200)
        let acted = try await client.request("POST", "/sessions/\(id)/actions", token: token, json: #"{"action":"incrementButtonTapped"}"#)
        #expect(acted.status == 200)
        let events = try await stream.readEvents { $0.name == "state" }
        #expect(events.last?.data["changes"]?["count"] == 1)
        let another = try await LoopbackClient(port: navd.port).request("POST", "/sessions", json: #"{"feature":"counter"}"#)
        #expect(another.status == 201)
        #expect(navd.process.isRunning)

        // Then the drain: the stream closes (without `end`: the session is durable) and navd exits.
        let closing = try await stream.readEventsUntilClosed()
        #expect(!closing.contains { $0.name == "end" })
        #expect(ContinuousClock.now - signalled >= .seconds(2))
        #expect(await navd.wait(timeout: .seconds(6)))
        #expect(ContinuousClock.now - signalled < ProcessTests.Running.stretched(.seconds(7)))
        #expect(navd.exitStatus == 0)
    }

    @Test func aSecondSignalEndsTheGraceAtOnce() async throws {
        let navd = try Running(Self.flags, environment: ["NAVD_SHUTDOWN_GRACE": "60"])
        try navd.waitUntilListening()
        let client = try LoopbackClient(port: navd.port)
        navd.process.terminate()
        try await Task.sleep(for: .milliseconds(200))
        #expect(try await client.request("GET", "/readyz").status == 503)
        #expect(navd.process.isRunning)
        let second = ContinuousClock.now
        navd.process.interrupt()  // SIGINT
        #expect(await navd.wait(timeout: .seconds(5)))
        #expect(ContinuousClock.now - second < ProcessTests.Running.stretched(.seconds(5)))
        #expect(navd.exitStatus == 0)
    }
}
