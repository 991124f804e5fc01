import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTP
import Testing

@Suite struct ShutdownTests {
    @Test func inFlightRequestFinishesAndNewConnectionsAreRefused() throws {
        let handler = TestHandler()
        let server = HTTPServer(configuration: .init(port: 0, loopCount: 2, backend: .underTest), handler: handler)
        try server.start()
        let port = server.port

        let idle = try TestClient(port: port)
        try idle.send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(try idle.readResponse().status == 200)

        let busy = try TestClient(port: port)
        try busy.send("GET /slow?ms=300 HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(TestHandler.eventually { handler.requestCount.load(ordering: .relaxed) == 2 })

        let streaming = try TestClient(port: port)
        try streaming.send("GET /stream?count=1 HTTP/1.1\r\nHost: x\r\n\r\n")
        _ = try streaming.read(until: "data: 0\n\n")

        server.beginShutdown()
        #expect(throws: TestClient.Failure.self) { try TestClient(port: port) }
        // The idle keep-alive connection is closed; the slow request is still answered.
        #expect(idle.waitForClose())
        let response = try busy.readResponse()
        #expect(response.status == 200)
        #expect(response.headers["Connection"] == "close")
        #expect(busy.waitForClose())

        // The stream stays open through beginShutdown; the application may still send.
        let stream = try #require(handler.streams.withLock { $0.first })
        #expect(stream.isOpen)
        stream.send(Array("data: bye\n\n".utf8))
        #expect(try streaming.read(until: "bye\n\n") == "data: bye\n\n")

        let start = ContinuousClock.now
        server.finishShutdown(deadline: .now + .milliseconds(300))
        #expect(ContinuousClock.now - start < .seconds(2))
        #expect(handler.closeReasons.withLock { $0 } == [.shutdown])
        #expect(!stream.isOpen)
        #expect(streaming.waitForClose())
        #expect(server.openConnectionCount == 0)
    }

    @Test func finishShutdownReturnsOnceConnectionsAreGone() throws {
        let (server, handler) = try Self.startedServer(lingerTimeout: .milliseconds(200))
        let client = try TestClient(port: server.port)
        try client.send("GET /slow?ms=200 HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(TestHandler.eventually { handler.requestCount.load(ordering: .relaxed) == 1 })
        let start = ContinuousClock.now
        server.finishShutdown(deadline: .now + .seconds(5))
        let elapsed = ContinuousClock.now - start
        #expect(elapsed >= .milliseconds(100))
        #expect(elapsed < .seconds(2))
        let response = try client.readResponse()
        #expect(response.status == 200)
        #expect(response.headers["Connection"] == "close")
    }

    @Test func startFailsClearlyWhenThePortIsTaken() throws {
        let first = HTTPServer(configuration: .init(port: 0, loopCount: 1, backend: .underTest), handler: TestHandler())
        try first.start()
        defer { first.finishShutdown(deadline: .now) }
        let second = HTTPServer(configuration: .init(port: first.port, loopCount: 1, backend: .underTest), handler: TestHandler())
        do {
            try second.start()
            Issue.record("second bind succeeded")
        } catch let error as HTTPServerError {
            #expect(error.description.contains("Address already in use"))
            #expect(error.code == EADDRINUSE)
        }
        #expect(throws: HTTPServerError.self) { try first.start() }
    }

    /// Connections the kernel completed but the server had not yet accepted when shutdown
    /// began (here: the only loop is busy) get an answer (a 503 refusal, written by the
    /// handler) and a clean close, never a reset; later clients are refused.
    @Test func connectionsWaitingInTheBacklogAreAnsweredNotReset() throws {
        let handler = TestHandler()
        let server = HTTPServer(
            configuration: .init(port: 0, loopCount: 1, lingerTimeout: .milliseconds(300)), handler: handler)
        try server.start()
        defer { server.finishShutdown(deadline: .now + .seconds(2)) }
        let busy = try TestClient(port: server.port)
        try busy.send("GET /block?ms=600 HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(TestHandler.eventually { handler.requestCount.load(ordering: .relaxed) == 1 })
        // The loop is held: these wait in the listen backlog, requests sent.
        let waiting = try (0..<6).map { _ in try TestClient(port: server.port) }
        for client in waiting { try client.send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n") }
        server.beginShutdown()
        #expect(try busy.readResponse().status == 200)
        for client in waiting {
            // Answered by the handler as a refusal, with a clean close after it.
            #expect(client.readToEnd() == .closed)
            let answer = String(decoding: client.buffered, as: UTF8.self)
            #expect(answer.hasPrefix("HTTP/1.1 503 "), "\(answer)")
            #expect(answer.contains("X-Refused: shuttingDown\r\n"), "\(answer)")
        }
        // New connections are refused once the backlog is drained.
        #expect(TestHandler.eventually(timeout: 5) { (try? TestClient(port: server.port)) == nil })
    }

    /// A request still arriving when the drain begins or ends never reached the handler: its
    /// client gets `503` and a clean close, never a bare close it cannot tell from a crash. Part
    /// of a head is answered at once; a body gets until the deadline to finish. A body that
    /// finishes in time is served.
    @Test func requestsStillArrivingAreRefusedNotDropped() throws {
        let (server, _) = try Self.startedServer(lingerTimeout: .milliseconds(500))
        let partHead = try TestClient(port: server.port)
        try partHead.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-")
        let stalledBody = try TestClient(port: server.port)
        try stalledBody.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        let finishingBody = try TestClient(port: server.port)
        try finishingBody.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
        let idle = try TestClient(port: server.port)
        #expect(TestHandler.eventually { server.openConnectionCount == 4 })

        server.beginShutdown()
        #expect(partHead.readToEnd() == .closed)
        let headAnswer = String(decoding: partHead.buffered, as: UTF8.self)
        #expect(headAnswer.hasPrefix("HTTP/1.1 503 "), "\(headAnswer)")
        #expect(headAnswer.contains("X-Refused: shuttingDown\r\n"), "\(headAnswer)")
        #expect(idle.waitForClose())
        #expect(idle.buffered.isEmpty, "an idle connection is closed without an answer")

        try finishingBody.send("defghij")
        let served = try finishingBody.readResponse()
        #expect(served.status == 200)
        #expect(served.headers["Connection"] == "close")

        let start = ContinuousClock.now
        server.finishShutdown(deadline: .now + .milliseconds(300))
        #expect(ContinuousClock.now - start < .seconds(2))
        #expect(stalledBody.readToEnd() == .closed)
        let bodyAnswer = String(decoding: stalledBody.buffered, as: UTF8.self)
        #expect(bodyAnswer.hasPrefix("HTTP/1.1 503 "), "\(bodyAnswer)")
        #expect(bodyAnswer.contains("X-Refused: shuttingDown\r\n"), "\(bodyAnswer)")
        #expect(server.openConnectionCount == 0)
    }

    /// Bytes a client sent before the stop that the loop had not read yet (it was busy) are read
    /// when the drain begins, not reset by closing over them: a whole request is served, with
    /// `Connection: close`, and part of a head is refused as any other.
    @Test func whatWasSentBeforeTheStopButNotYetReadIsAnswered() throws {
        let handler = TestHandler()
        let server = HTTPServer(
            configuration: .init(port: 0, loopCount: 1, lingerTimeout: .milliseconds(300), backend: .underTest), handler: handler)
        try server.start()
        defer { server.finishShutdown(deadline: .now + .seconds(2)) }
        let whole = try TestClient(port: server.port)
        let partHead = try TestClient(port: server.port)
        #expect(TestHandler.eventually { server.openConnectionCount == 2 })
        let busy = try TestClient(port: server.port)
        try busy.send("GET /block?ms=500 HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(TestHandler.eventually { handler.requestCount.load(ordering: .relaxed) == 1 })
        // The only loop is held: these bytes wait in the kernel, and the stop is posted behind
        // them. Mail goes first once the loop is free, so the drain begins before it reads them.
        try whole.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
        try partHead.send("POST /echo HTTP/1.1\r\nHo")
        server.beginShutdown()
        #expect(try busy.readResponse().status == 200)
        let served = try whole.readResponse()
        #expect(served.status == 200)
        #expect(served.headers["Connection"] == "close")
        #expect(whole.readToEnd() == .closed)
        #expect(partHead.readToEnd() == .closed)
        let refusal = String(decoding: partHead.buffered, as: UTF8.self)
        #expect(refusal.hasPrefix("HTTP/1.1 503 "), "\(refusal)")
        #expect(refusal.contains("X-Refused: shuttingDown\r\n"), "\(refusal)")
    }

    private static func startedServer(lingerTimeout: Duration) throws -> (HTTPServer, TestHandler) {
        let handler = TestHandler()
        let server = HTTPServer(
            configuration: .init(port: 0, loopCount: 2, lingerTimeout: lingerTimeout, backend: .underTest), handler: handler)
        try server.start()
        return (server, handler)
    }
}
