import Foundation
@testable import NavServer
@testable import NavigationCore
import Testing
import TestSupport

/// The event stream as API.md describes it, read off real sockets.
@Suite(.serialized) struct EventStreamTests {
    /// Opens a stream and returns the client, positioned after the response head.
    func subscribe(_ server: TestServer, _ id: String, _ token: String, lastEventID: Int? = nil, viaHeader: Bool = true) async throws -> LoopbackClient {
        let client = try server.client()
        var headers: [(String, String)] = []
        var target = "/sessions/\(id)/events"
        if viaHeader {
            headers.append(("Authorization", "Bearer \(token)"))
            if let lastEventID { headers.append(("Last-Event-ID", String(lastEventID))) }
        } else {
            target += "?token=\(token)" + (lastEventID.map { "&lastEventId=\($0)" } ?? "")
        }
        try await client.send(LoopbackClient.format("GET", target, headers: headers))
        let head = try await client.readResponse()
        #expect(head.status == 200)
        #expect(head.header("content-type") == "text/event-stream; charset=utf-8")
        #expect(head.header("cache-control") == "no-cache")
        return client
    }

    @Test func aFreshStreamStartsWithRetryAndASnapshotThenLiveEvents() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let stream = try await subscribe(server, id, token, viaHeader: false)
        let snapshot = try #require(try await stream.readEvents { _ in true }.first)
        #expect(snapshot.name == "snapshot" && snapshot.id == 0)
        #expect(snapshot.data["navigation"]?["feature"] == "counter")
        _ = try await server.client().act(id, token: token, "settingsButtonTapped")
        let events = try await stream.readEvents { $0.name == "present" }
        #expect(events.map(\.name) == ["present"])
        #expect(events[0].id == 1 && events[0].data["slot"] == "destination.settings" && events[0].data["parent"] == "root")
        await server.stop()
    }

    @Test func resumingSendsEverythingAfterTheIdAndNothingTwice() async throws {
        let server = try await TestServer { $0.sessionLimits.eventBufferCount = 4 }
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        for _ in 0..<6 { _ = try await client.act(id, token: token, "incrementButtonTapped") }
        let resumed = try await subscribe(server, id, token, lastEventID: 3)
        let replay = try await resumed.readEvents { $0.id == 6 }
        #expect(replay.map(\.id) == [4, 5, 6])
        #expect(replay.map(\.name) == ["state", "state", "state"])
        _ = try await client.act(id, token: token, "incrementButtonTapped")
        #expect(try await resumed.readEvents { _ in true }.map(\.id) == [7])

        // Ids never issued, or not ids at all: `0 6` and `+5` are not 6 and 5.
        for stale in ["1", "99", "banana", "0%206", "%2B5", "-0", "5.0"] {
            let fresh = try server.client()
            try await fresh.send(LoopbackClient.format("GET", "/sessions/\(id)/events?token=\(token)&lastEventId=\(stale)"))
            _ = try await fresh.readResponse()
            let first = try #require(try await fresh.readEvents { _ in true }.first)
            #expect(first.name == "snapshot" && first.id == 7, "Last-Event-ID \(stale)")
        }
        // Two Last-Event-ID fields name no one place to resume from, whichever comes first.
        for pair in [("5", "6"), ("6", "5")] {
            let twice = try server.client()
            try await twice.send(LoopbackClient.format("GET", "/sessions/\(id)/events",
                                                       headers: [("Authorization", "Bearer \(token)"), ("Last-Event-ID", pair.0), ("Last-Event-ID", pair.1)]))
            _ = try await twice.readResponse()
            let first = try #require(try await twice.readEvents { _ in true }.first)
            #expect(first.name == "snapshot" && first.id == 7, "Last-Event-ID \(pair)")
        }
        // Spaces around an id are allowed, in the header as in the query.
        let spaced = try server.client()
        try await spaced.send(LoopbackClient.format("GET", "/sessions/\(id)/events?lastEventId=%205%20",
                                                    headers: [("Authorization", "Bearer \(token)")]))
        _ = try await spaced.readResponse()
        #expect(try await spaced.readEvents { $0.id == 7 }.map(\.id) == [6, 7])
        let upToDate = try await subscribe(server, id, token, lastEventID: 7, viaHeader: false)
        _ = try await client.act(id, token: token, "decrementButtonTapped")
        #expect(try await upToDate.readEvents { _ in true }.map(\.id) == [8])
        await server.stop()
    }

    @Test func twoSubscribersConvergeOnTheServersTree() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("app")
        let first = try await subscribe(server, id, token)
        let client = try server.client()
        _ = try await client.act(id, token: token, "counterButtonTapped")
        let second = try await subscribe(server, id, token)
        let tree0 = try await client.get("/sessions/\(id)/navigation", token: token).json
        let counter = try #require(tree0["stacks"]?[0]?["elements"]?[0]?["id"]?.stringValue)
        _ = try await client.act(id, token: token, "settingsButtonTapped", target: counter)
        _ = try await client.act(id, token: token, "counterButtonTapped")
        _ = try await client.act(id, token: token, "incrementButtonTapped", target: counter)
        let stack = try #require(tree0["stacks"]?[0]?["id"]?.stringValue)
        _ = try await client.request("POST", "/sessions/\(id)/stacks/\(stack)/pop", token: token, json: #"{"count":2}"#)
        let finalSequence = 1 + 1 + 1 + 1 + 2  // push, present, push, state, dismiss+pop
        let expected = try await client.get("/sessions/\(id)/navigation", token: token).json

        for stream in [first, second] {
            let events = try await stream.readEvents { $0.id == finalSequence }
            var replica: NavigationReplica?
            for event in events {
                if event.name == "snapshot" {
                    replica = try NavigationReplica(navigation: event.data["navigation"] ?? .null)
                } else {
                    try replica?.apply(event: event.name, data: event.data)
                }
            }
            #expect(replica?.navigation == expected)
        }
        await server.stop()
    }

    @Test func deletingASessionSendsEndAndClosesItsStreams() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let stream = try await subscribe(server, id, token)
        _ = try await stream.readEvents { $0.name == "snapshot" }
        #expect(try await server.client().request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")]).status == 204)
        let end = try await stream.readEvents { $0.name == "end" }
        #expect(end.last?.data == json(#"{"reason":"deleted"}"#))
        #expect(await stream.readUntilClosed())
        await server.stop()
    }

    @Test func headDescribesTheStreamWithoutOpeningOne() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        let head = try await client.request("HEAD", "/sessions/\(id)/events?token=\(token)")
        #expect(head.status == 200 && head.header("content-type") == "text/event-stream; charset=utf-8")
        // GET's head fields, and no claim of a length GET would not send (RFC 9110 §9.3.2).
        #expect(head.header("cache-control") == "no-cache" && head.header("x-accel-buffering") == "no")
        #expect(head.header("content-length") == nil, "a HEAD says the stream's length is 0")
        // The same connection answers the next request: no stream was started on it.
        #expect(try await client.request("GET", "/healthz").status == 200)
        #expect(try await server.client().request("GET", "/metrics").text.contains("navd_event_streams_open 0"))
        await server.stop()
    }

    @Test func idleStreamsGetHeartbeats() async throws {
        let server = try await TestServer { $0.heartbeatInterval = .milliseconds(100) }
        let (id, token) = try await server.session("counter")
        let stream = try await subscribe(server, id, token)
        _ = try await stream.readEvents { $0.name == "snapshot" }
        // Two heartbeats, as comment lines, while nothing else happens (read with the client's
        // 10 s timeout rather than counted after a fixed sleep: a busy machine runs them late).
        try await stream.readComments(until: 2)
        // And the stream still carries events after them.
        _ = try await server.client().act(id, token: token, "incrementButtonTapped")
        let events = try await stream.readEvents { $0.name == "state" }
        #expect(events.map(\.name) == ["state"])
        await server.stop()
    }

    /// A snapshot larger than the stream's 1 MiB output limit reaches a client that reads it,
    /// and is not held for one that does not: that stream is closed (after 5 s without progress)
    /// and its memory freed, although no heartbeat or event came to trip the limit.
    /// A resume whose missed events would take more than a stream holds (1 MiB) gets a snapshot
    /// instead: queued whole, the event buffer (8 MiB by default) would wait for each connection.
    @Test func aResumeOfMoreThanAStreamHoldsGetsASnapshot() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("app")
        let client = try server.client()
        let fact = String(repeating: "f", count: 60_000)
        let counter = #"{"counter":{"destination":{"fact":{"value":"\#(fact)"}}}}"#
        var lastID = 0
        for _ in 0..<20 {
            let pushed = try await client.request("POST", "/sessions/\(id)/features/root/push", token: token, json: #"{"value":\#(counter)}"#)
            #expect(pushed.status == 200)
            lastID = pushed.json["events"]?.arrayValue?.last?["id"]?.intValue ?? lastID
        }
        let last = lastID
        #expect(last == 40, "each push brings its element and the element's fact sheet: 1.2 MB in all")
        let far = try await subscribe(server, id, token, lastEventID: 0)
        let first = try #require(try await far.readEvents { _ in true }.first)
        #expect(first.name == "snapshot" && first.id == last)
        let near = try await subscribe(server, id, token, lastEventID: last - 2)
        #expect(try await near.readEvents { $0.id == last }.map(\.id) == [last - 1, last])
        await server.stop()
    }

    @Test func aSnapshotBeyondTheOutputLimitIsHeldOnlyForAClientThatReadsIt() async throws {
        let server = try await TestServer()
        let fact = String(repeating: "f", count: 60_000)
        let counter = #"{"counter":{"destination":{"fact":{"value":"\#(fact)"}}}}"#
        let path = [String](repeating: counter, count: 15).joined(separator: ",")
        let (id, token) = try await server.session("app", state: #"{"path":[\#(path)]}"#)
        let client = try server.client()
        for _ in 0..<10 {
            let pushed = try await client.request("POST", "/sessions/\(id)/features/root/push", token: token, json: #"{"value":\#(counter)}"#)
            #expect(pushed.status == 200)
        }

        let reader = try await subscribe(server, id, token)
        let snapshot = try #require(try await reader.readEvents { $0.name == "snapshot" }.first)
        #expect(snapshot.data["navigation"]?["stacks"]?[0]?["elements"]?.arrayValue?.count == 25)

        let idle = try LoopbackClient(port: server.port, timeoutSeconds: 5, receiveBuffer: 4096)
        try await idle.send(LoopbackClient.format("GET", "/sessions/\(id)/events", headers: [("Authorization", "Bearer \(token)")]))
        try await Task.sleep(for: .seconds(6))
        // Closed by now: what it gets is a part of the snapshot, then the end of the connection.
        #expect(await idle.readUntilClosed())
        #expect(!String(decoding: idle.unread, as: UTF8.self).contains("\n\n\n"))

        // The reading stream is unaffected and still live.
        _ = try await client.act(id, token: token, "counterButtonTapped")
        let pushed = try await reader.readEvents { $0.name == "push" }
        #expect(pushed.last?.name == "push")
        await server.stop()
    }
}
