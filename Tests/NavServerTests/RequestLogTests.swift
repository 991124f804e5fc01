import Foundation
@testable import NavServer
import NavigationCore
import Synchronization
import Testing
import TestSupport

/// The log a real server writes, over loopback: JSON lines with a time, a level and an event;
/// request ids sent back on every answer; stream lines when streams close.
@Suite struct RequestLogTests {
    @Test func timestampsAreRFC3339InUTCWithMilliseconds() {
        #expect(RequestLog.rfc3339(seconds: 0, milliseconds: 0) == "1970-01-01T00:00:00.000Z")
        #expect(RequestLog.rfc3339(seconds: 1_795_330_986, milliseconds: 7) == "2026-11-22T07:03:06.007Z")
        #expect(RequestLog.rfc3339(seconds: 1_795_330_986, milliseconds: 123) == "2026-11-22T07:03:06.123Z")
    }

    /// A client cannot write error lines at will: only navd's own fault is one.
    @Test func onlyA500IsLoggedAsAnError() {
        #expect([200, 404, 429].map(RequestLog.level(ofStatus:)) == [.info, .info, .info])
        #expect([501, 503, 505].map(RequestLog.level(ofStatus:)) == [.warn, .warn, .warn])
        #expect(RequestLog.level(ofStatus: 500) == .error)
    }

    static func isRFC3339Milliseconds(_ text: String?) -> Bool {
        guard let text else { return false }
        return text.wholeMatch(of: /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z/) != nil
    }

    static func number(_ json: JSON?) -> Double? {
        switch json {
        case .int(let value)?: Double(value)
        case .double(let value)?: value
        default: nil
        }
    }

    static func isGeneratedID(_ text: String?) -> Bool {
        guard let text else { return false }
        return text.wholeMatch(of: /[0-9a-f]{32}/) != nil
    }

    @Test func everyLineIsAJSONObjectWithTimeLevelAndEvent() async throws {
        let log = LogCapture()
        let server = try await TestServer(log: log)
        let before = Date().timeIntervalSince1970
        let client = try server.client()
        _ = try await client.request("GET", "/healthz")
        _ = try await client.request("GET", "/nope")
        _ = try await client.request("GET", "/sessions/0123/navigation")
        let last = try await client.request("GET", "/features")
        _ = try await log.request(last.header("X-Request-ID"))
        await server.stop()
        let lines = log.lines
        #expect(lines.count >= 4)
        for line in lines {
            #expect(Self.isRFC3339Milliseconds(line["time"]?.stringValue), "\(line)")
            #expect(["info", "warn", "error"].contains(line["level"]?.stringValue ?? ""), "\(line)")
            #expect(line["event"]?.stringValue != nil, "\(line)")
        }
        // The time is now, in UTC.
        let stamp = try #require(lines.first?["time"]?.stringValue)
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        let logged = try #require(formatter.date(from: stamp)).timeIntervalSince1970
        #expect(abs(logged - before) < 5, "\(stamp)")
    }

    @Test func aValidRequestIDIsSentBackAndLoggedAnyOtherIsReplaced() async throws {
        let log = LogCapture()
        let server = try await TestServer(log: log)
        defer { Task { await server.stop() } }
        let client = try server.client()
        let valid = ["abc-123", "3f2a0c1e-8d7b-4a55-9e2c-0b1d2e3f4a5b", "Root=1-5e1b4151:trace_id.x+y/z=", String(repeating: "a", count: 128)]
        for id in valid {
            let response = try await client.request("GET", "/healthz", headers: [("X-Request-ID", id)])
            #expect(response.header("X-Request-ID") == id)
            let line = try await log.request(id)
            #expect(line["path"] == "/healthz")
        }
        let invalid = ["", String(repeating: "a", count: 129), "has space", "quote\"d", "semi;colon", "ünïcode", "tab\there"]
        var seen: Set<String> = []
        for id in invalid {
            let response = try await client.request("GET", "/healthz", headers: [("X-Request-ID", id)])
            let sent = try #require(response.header("X-Request-ID"))
            #expect(sent != id)
            #expect(Self.isGeneratedID(sent), "\(sent)")
            #expect(seen.insert(sent).inserted, "ids are unique")
            _ = try await log.request(sent)
        }
        // Two ids are ambiguous: a fresh one.
        let twice = try await client.request("GET", "/healthz", headers: [("X-Request-ID", "one"), ("X-Request-ID", "two")])
        #expect(Self.isGeneratedID(twice.header("X-Request-ID")))
        // None: a fresh one, different each time.
        let first = try await client.request("GET", "/healthz")
        let second = try await client.request("GET", "/healthz")
        #expect(Self.isGeneratedID(first.header("X-Request-ID")))
        #expect(first.header("X-Request-ID") != second.header("X-Request-ID"))
    }

    @Test func errorsPreflightsAndStreamsCarryTheRequestID() async throws {
        let log = LogCapture()
        let server = try await TestServer(log: log) { $0.cors.origins = .only(["http://localhost:3000"]) }
        defer { Task { await server.stop() } }
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        let json = ("Content-Type", "application/json")
        let requests: [(String, String, [(String, String)], String?, Int)] = [
            ("GET", "/nope", [], nil, 404),
            ("GET", "/sessions/\(id)", [], nil, 401),
            ("PATCH", "/healthz", [], nil, 405),
            ("POST", "/sessions", [json], #"{"feature":"nope"}"#, 422),
            ("POST", "/sessions", [], #"{"feature":"counter"}"#, 415),
            ("POST", "/sessions/\(id)/actions", [("Authorization", "Bearer \(token)"), json], "{", 400),
            ("POST", "/sessions/\(id)/actions", [("Authorization", "Bearer \(token)"), ("If-Match", "\"9\""), json], #"{"action":"incrementButtonTapped"}"#, 412),
            ("OPTIONS", "/sessions", [("Origin", "http://localhost:3000"), ("Access-Control-Request-Method", "POST")], nil, 204),
            ("HEAD", "/sessions/\(id)/events", [("Authorization", "Bearer \(token)")], nil, 200),
        ]
        for (index, (method, target, headers, body, status)) in requests.enumerated() {
            let requestID = "error-\(index)"
            let response = try await client.request(method, target, headers: headers + [("X-Request-ID", requestID)],
                                                    body: body.map { Array($0.utf8) })
            #expect(response.status == status, "\(method) \(target)")
            #expect(response.header("X-Request-ID") == requestID, "\(method) \(target)")
            let line = try await log.request(requestID)
            #expect(line["status"]?.intValue == status)
        }
        // A browser may send the id and read it back.
        let preflight = try await client.request("OPTIONS", "/sessions", headers: [("Origin", "http://localhost:3000")])
        #expect(preflight.header("Access-Control-Allow-Headers")?.contains("X-Request-ID") == true)
        #expect(preflight.header("Access-Control-Expose-Headers")?.contains("X-Request-ID") == true)

        let stream = try server.client()
        try await stream.send(LoopbackClient.format("GET", "/sessions/\(id)/events?token=\(token)", headers: [("X-Request-ID", "the-stream")]))
        let opened = try await stream.readResponse(head: true)
        #expect(opened.status == 200)
        #expect(opened.header("X-Request-ID") == "the-stream")
        #expect(try await log.request("the-stream")["status"] == 200)
    }

    /// A request refused for its body alone (a transfer coding navd does not decode, a length
    /// over the limit) is logged with its method, path and request id, like any other.
    @Test func aRequestRefusedForItsBodyIsLoggedWithItsMethodAndPath() async throws {
        let log = LogCapture()
        let server = try await TestServer(log: log)
        defer { Task { await server.stop() } }
        // Over the 1 MiB a body may have.
        let refusals: [(String, Int)] = [("Transfer-Encoding: gzip", 501), ("Content-Length: 2000000", 413)]
        for (index, (field, status)) in refusals.enumerated() {
            let requestID = "refused-\(index)"
            let client = try server.client()
            try await client.send(Array("POST /sessions HTTP/1.1\r\nHost: x\r\nX-Request-ID: \(requestID)\r\n\(field)\r\n\r\n".utf8))
            let response = try await client.readResponse()
            #expect(response.status == status, "\(field)")
            #expect(response.header("X-Request-ID") == requestID, "\(field)")
            let line = try await log.request(requestID)
            #expect(line["status"]?.intValue == status)
            #expect(line["method"] == "POST", "\(field)")
            #expect(line["path"] == "/sessions", "\(field)")
        }
    }

    @Test func requestLinesHaveTheRemoteAddressAndTheBytesSent() async throws {
        let log = LogCapture()
        let server = try await TestServer(log: log)
        defer { Task { await server.stop() } }
        let client = try server.client()
        let features = try await client.request("GET", "/features", headers: [("X-Request-ID", "features")])
        let line = try await log.request("features")
        #expect(line["remote"]?.stringValue == "127.0.0.1:\(client.localPort)")
        #expect(line["bytes"]?.intValue == features.body.count)
        #expect(features.body.count > 100)
        #expect(line["method"] == "GET")
        #expect(line["status"] == 200)
        #expect(line["level"] == "info")
        #expect((Self.number(line["duration_ms"]) ?? -1) >= 0)
        // HEAD sends no body.
        _ = try await client.request("HEAD", "/features", headers: [("X-Request-ID", "head")])
        #expect(try await log.request("head")["bytes"] == 0)
        let missing = try await client.request("GET", "/nope", headers: [("X-Request-ID", "missing")])
        #expect(try await log.request("missing")["bytes"]?.intValue == missing.body.count)
        // Tokens never reach the log.
        let (id, token) = try await server.session("counter")
        _ = try await client.request("GET", "/sessions/\(id)/navigation?token=\(token)&wait=false&x=1", headers: [("X-Request-ID", "query")])
        let query = try await log.request("query")
        #expect(query["path"] == .string("/sessions/\(id)/navigation?wait=false"))
        #expect(query["query_ignored"] == 2, "the token and x, counted, not shown")
        _ = try await client.get("/sessions/\(id)", token: token)
        try await Task.sleep(for: .milliseconds(300))
        #expect(!log.text.contains(token))
    }

    /// An operator who sees 421s learns from the log which name to allow; the line of any other
    /// request does not carry the host.
    @Test func aMisdirectedRequestsLineNamesTheHostItAskedFor() async throws {
        let log = LogCapture()
        let server = try await TestServer(log: log)
        defer { Task { await server.stop() } }
        let client = try server.client()
        try await client.send("GET /features HTTP/1.1\r\nHost: app.example:8080\r\nX-Request-ID: misdirected\r\n\r\n")
        #expect(try await client.readResponse().status == 421)
        let line = try await log.request("misdirected")
        #expect(line["host"] == "app.example:8080")
        #expect(line["status"] == 421 && line["path"] == "/features")
        // Waiting for `100 Continue`, refused before the body: the same line.
        let waiting = try server.client()
        try await waiting.send("POST /sessions HTTP/1.1\r\nHost: other.example\r\nX-Request-ID: before-body\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
        #expect(try await waiting.readResponse().status == 421)
        #expect(try await log.request("before-body")["host"] == "other.example")
        // A name no host has: cut, as a message quoting it is.
        let long = String(repeating: "a", count: 600) + ".example"
        let longClient = try server.client()
        try await longClient.send("GET /features HTTP/1.1\r\nHost: \(long)\r\nX-Request-ID: long\r\n\r\n")
        #expect(try await longClient.readResponse().status == 421)
        #expect(try await log.request("long")["host"]?.stringValue == String(long.prefix(256)) + "…")
        _ = try await client.request("GET", "/features", headers: [("X-Request-ID", "allowed")])
        #expect(try await log.request("allowed")["host"] == nil)
    }

    @Test func aStreamIsLoggedWhenItClosesWithItsDurationEventsAndReason() async throws {
        let log = LogCapture()
        let server = try await TestServer(log: log)
        defer { Task { await server.stop() } }
        let (id, token) = try await server.session("counter")
        let client = try server.client()

        // Closed by the client, after a snapshot and two events.
        var stream: LoopbackClient? = try server.client()
        try await stream?.send(LoopbackClient.format("GET", "/sessions/\(id)/events?token=\(token)", headers: [("X-Request-ID", "closes")]))
        _ = try await stream?.readResponse(head: true)
        _ = try await stream?.readEvents { $0.name == "snapshot" }
        _ = try await client.act(id, token: token, "incrementButtonTapped")
        _ = try await stream?.readEvents { $0.name == "state" }
        try await Task.sleep(for: .milliseconds(100))
        stream = nil
        let closed = try await log.line { $0["event"] == "stream_closed" && $0["request_id"] == "closes" }
        #expect(closed["reason"] == "client_closed")
        #expect(closed["events"] == 2, "the snapshot and one state event")
        #expect((Self.number(closed["duration_ms"]) ?? 0) >= 100)
        #expect((closed["bytes"]?.intValue ?? 0) > 50)
        #expect(closed["session"] == .string(id))
        #expect(closed["level"] == "info")
        #expect(Self.isRFC3339Milliseconds(closed["time"]?.stringValue))
        #expect(closed["remote"]?.stringValue?.hasPrefix("127.0.0.1:") == true)

        // Ended by a DELETE: `end` is its last event.
        let ended = try server.client()
        try await ended.send(LoopbackClient.format("GET", "/sessions/\(id)/events?token=\(token)", headers: [("X-Request-ID", "ends")]))
        _ = try await ended.readResponse(head: true)
        _ = try await ended.readEvents { $0.name == "snapshot" }
        #expect(try await client.request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")]).status == 204)
        _ = try await ended.readEvents { $0.name == "end" }
        let deleted = try await log.line { $0["event"] == "stream_closed" && $0["request_id"] == "ends" }
        #expect(deleted["reason"] == "session_ended")
        #expect(deleted["events"] == 2, "the snapshot and end")
    }

    @Test func streamsOpenAtShutdownAreLoggedAsShutdown() async throws {
        let log = LogCapture()
        let server = try await TestServer(log: log)
        let (id, token) = try await server.session("counter")
        let stream = try server.client()
        try await stream.send(LoopbackClient.format("GET", "/sessions/\(id)/events?token=\(token)", headers: [("X-Request-ID", "at-shutdown")]))
        _ = try await stream.readResponse(head: true)
        _ = try await stream.readEvents { $0.name == "snapshot" }
        await server.stop()
        let line = try await log.line { $0["event"] == "stream_closed" && $0["request_id"] == "at-shutdown" }
        #expect(line["reason"] == "shutdown")
    }

    @Test func aStreamTooSlowToKeepUpIsLoggedAsAWarning() async throws {
        let log = LogCapture()
        let server = try await TestServer(log: log)
        defer { Task { await server.stop() } }
        let client = try server.client()
        let created = try await client.request("POST", "/sessions", json: #"{"feature":"gallery","state":{"text":""}}"#)
        let id = try #require(created.json["id"]?.stringValue)
        let token = try #require(created.json["token"]?.stringValue)
        let editor = try #require(created.json["navigation"]?["presentations"]?[0]?["id"]?.stringValue)
        // A stream that never reads: its socket buffers fill, then its 1 MiB queue.
        let stalled = try LoopbackClient(port: server.port)
        try await stalled.send(LoopbackClient.format("GET", "/sessions/\(id)/events?token=\(token)", headers: [("X-Request-ID", "stalled")]))
        let text = String(repeating: "x", count: 60_000)
        for round in 0..<500 where log.lines.allSatisfy({ $0["request_id"] != "stalled" || $0["event"] != "stream_closed" }) {
            _ = try await client.request("PUT", "/sessions/\(id)/features/\(editor)/bindings/text", token: token, json: #""\#(text)\#(round)""#)
        }
        let line = try await log.line { $0["event"] == "stream_closed" && $0["request_id"] == "stalled" }
        #expect(line["reason"] == "too_slow")
        #expect(line["level"] == "warn")
    }

    /// The writer lives as long as its server: once stopped, what is recorded waits for the next
    /// explicit write (a `stopped` note) instead of a timer nobody owns.
    @Test func theWriterWritesEvery200MillisecondsUntilItIsStopped() async throws {
        let capture = LogCapture()
        let log = RequestLog(enabled: true, output: capture.output)
        func record(_ id: String) {
            log.record(.init(id: id, remote: "127.0.0.1:1", method: "GET", path: "/healthz", query: [],
                             status: 200, bytes: 0, seconds: 0))
        }
        log.startWriting()
        record("while-writing")
        _ = try await capture.request("while-writing")
        log.stopWriting()
        record("after-stopping")
        try await Task.sleep(for: .milliseconds(600))
        #expect(capture.lines.count == 1)
        log.note(.info, "stopped")
        #expect(capture.lines.map { $0["request_id"]?.stringValue ?? $0["event"]?.stringValue } == ["while-writing", "after-stopping", "stopped"])
    }
    /// A stdout that takes part of a line (a full disk) gets the rest of it before anything
    /// else, so every line arrives whole; lines past the buffer's bound while it takes nothing
    /// are dropped and counted, never torn.
    @Test func aLineStdoutTookPartOfIsFinishedFirstAndLinesAreLostWholeOrNotAtAll() async throws {
        let written = Mutex<[UInt8]>([])
        let room = Mutex<Int?>(10)
        let log = RequestLog(enabled: true, output: { bytes, _ in
            let taken = min(bytes.count, room.withLock { $0 } ?? bytes.count)
            room.withLock { if $0 != nil { $0 = 0 } }
            written.withLock { $0 += bytes.prefix(taken) }
            return StandardStream.Written(count: taken, isClosed: false)
        })
        func record(_ id: String) {
            log.record(.init(id: id, remote: "127.0.0.1:1", method: "GET", path: "/healthz", query: [],
                             status: 200, bytes: 0, seconds: 0))
        }
        record("first")
        record("second")
        log.flush(by: .now)
        #expect(written.withLock { $0.count } == 10, "a full disk took the first 10 bytes")
        var recorded = 2
        while recorded < 40_000 {
            record("more-\(recorded)")
            recorded += 1
        }
        log.flush(by: .now)
        room.withLock { $0 = nil }
        log.flush(by: .now)
        let text = String(decoding: written.withLock { $0 }, as: UTF8.self)
        #expect(text.hasSuffix("\n"))
        let lines = text.split(separator: "\n").map { (try? JSONParser.parse(Array($0.utf8))) ?? .null }
        #expect(!lines.contains(.null), "every line is whole")
        #expect(lines.prefix(2).map { $0["request_id"] } == ["first", "second"])
        let dropped = try #require(lines.first { $0["event"] == "log_lines_dropped" }?["count"]?.intValue)
        let kept = lines.filter { $0["event"] == "request" }.count
        #expect(dropped > 0)
        #expect(kept + dropped == recorded, "each line is written or counted, once")
    }

    /// A stdout nobody reads holds up no one: notes return at once, and a stop waits for it
    /// 200 ms at most, a write under way included.
    @Test func aStdoutThatTakesNothingHoldsUpNeitherNotesNorTheStop() async throws {
        let log = RequestLog(enabled: true, output: { _, deadline in
            while ContinuousClock.now < deadline() { Thread.sleep(forTimeInterval: 0.005) }
            return StandardStream.Written(count: 0, isClosed: false)
        })
        log.startWriting()
        let started = ContinuousClock.now
        for index in 0..<20 { log.note(.info, "noted", [("index", .int(index))]) }
        #expect(ContinuousClock.now - started < .milliseconds(100))
        try await Task.sleep(for: .milliseconds(300))
        let stopping = ContinuousClock.now
        log.stopWriting()
        log.note(.info, "stopped")
        #expect(ContinuousClock.now - stopping < .milliseconds(350), "200 ms, and the moment a waiting write takes to see it")
    }

    /// What stdout has not taken yet counts toward the bound while a write waits for it: lines
    /// recorded meanwhile are dropped past 4 MiB, not piled up behind the wait.
    @Test func linesRecordedWhileAWriteWaitsCountTowardTheBound() async throws {
        let taking = Atomic(false)
        let written = Mutex<[UInt8]>([])
        let log = RequestLog(enabled: true, output: { bytes, deadline in
            guard taking.load(ordering: .acquiring) else {
                while ContinuousClock.now < deadline() { Thread.sleep(forTimeInterval: 0.005) }
                return StandardStream.Written(count: 0, isClosed: false)
            }
            written.withLock { $0 += bytes }
            return StandardStream.Written(count: bytes.count, isClosed: false)
        })
        func record(_ index: Int) {
            log.record(.init(id: "line-\(index)", remote: "127.0.0.1:1", method: "GET", path: "/healthz", query: [],
                             status: 200, bytes: 0, seconds: 0))
        }
        var recorded = 0
        while recorded < 25_000 {  // about 5 MiB: over the bound before the first write
            record(recorded)
            recorded += 1
        }
        let waiting = Thread { log.flush(by: .now + .milliseconds(500)) }
        waiting.start()
        try await Task.sleep(for: .milliseconds(100))
        while recorded < 75_000 {  // 10 MiB more while that write waits
            record(recorded)
            recorded += 1
        }
        try await Task.sleep(for: .milliseconds(600))
        taking.store(true, ordering: .releasing)
        log.flush(by: .now + .seconds(1))
        let bytes = written.withLock { $0 }
        #expect(bytes.count < (4 << 20) + 4096, "kept within the bound: \(bytes.count) bytes")
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n").map { (try? JSONParser.parse(Array($0.utf8))) ?? .null }
        let dropped = lines.compactMap { $0["event"] == "log_lines_dropped" ? $0["count"]?.intValue : nil }.reduce(0, +)
        #expect(lines.filter { $0["event"] == "request" }.count + dropped == recorded, "each line written or counted, once")
    }
}
