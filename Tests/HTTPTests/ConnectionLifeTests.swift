#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTP
import Testing

/// Paths through a connection's life, end to end, as `ConnectionState` decides them: HEAD on a
/// stream, a client's FIN at each point, pipelining after a close or a stream, shutdown, linger
/// and every timeout. One at a time: each test blocks its thread on a socket or a sleep, and
/// twenty of them at once would starve the rest of the suite of the threads its tasks run on.
@Suite(.serialized) struct ConnectionLifeTests {
    /// HEAD on a stream: the head goes out, no event, then FIN; the stream ends closedByServer.
    @Test func headOfAStreamGetsItsHeadThenFin() throws {
        try withServer { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("HEAD /stream?count=2 HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try client.read(until: "\r\n\r\n")
            #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(client.readToEnd() == .closed)
            #expect(client.buffered.isEmpty, "no event after the head")
            #expect(TestHandler.eventually { handler.closeReasons.withLock { $0 } == [.closedByServer] })
            #expect(TestHandler.eventually { server.openConnectionCount == 0 })
        }
    }

    /// HEAD on a stream whose client sent FIN before the stream opened: head, then close at once.
    @Test func headOfAStreamAfterTheClientsFin() throws {
        try withServer({ $0.lingerTimeout = .seconds(5) }) { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("HEAD /slowstream HTTP/1.1\r\nHost: x\r\n\r\n")
            client.shutdownWrite()
            let head = try client.read(until: "\r\n\r\n")
            #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n"))
            let start = ContinuousClock.now
            #expect(client.readToEnd() == .closed)
            #expect(ContinuousClock.now - start < .seconds(2), "no linger after the client's FIN")
            #expect(TestHandler.eventually { handler.closeReasons.withLock { $0 } == [.closedByServer] })
        }
    }

    /// A GET stream opened after the client's FIN: the server notices the FIN and closes.
    @Test func aStreamOpenedAfterTheClientsFinCloses() throws {
        try withServer { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("GET /slowstream HTTP/1.1\r\nHost: x\r\n\r\n")
            client.shutdownWrite()
            let head = try client.read(until: "\r\n\r\n")
            #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(client.readToEnd() == .closed)
            #expect(TestHandler.eventually { handler.closeReasons.withLock { $0 } == [.clientClosed] })
        }
    }

    /// Requests pipelined after "Connection: close" are not served; the answer is whole; FIN.
    @Test func pipelinedAfterConnectionClose() throws {
        try withServer { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.headers["Connection"] == "close")
            #expect(response.bodyText.contains("\"/a\""))
            #expect(client.readToEnd() == .closed)
            #expect(client.buffered.isEmpty)
            #expect(handler.requestCount.load(ordering: .relaxed) == 1)
        }
    }

    /// Requests pipelined after a stream are never served, in one packet or after it.
    @Test func pipelinedAfterAStream() throws {
        try withServer { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("GET /stream?count=1 HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try client.read(until: "data: 0\n\n")
            try client.send("GET /c HTTP/1.1\r\nHost: x\r\n\r\n")
            usleep(100_000)
            let stream = try #require(handler.streams.withLock { $0.first })
            stream.send(Array("data: end\n\n".utf8))
            stream.close()
            #expect(client.readToEnd() == .closed)
            #expect(String(decoding: client.buffered, as: UTF8.self) == "data: end\n\n")
            #expect(handler.requestCount.load(ordering: .relaxed) == 1)
            #expect(TestHandler.eventually { handler.closeReasons.withLock { $0 } == [.closedByServer] })
        }
    }

    /// A stream behind a slow answer in the pipeline: the answer first, then the stream.
    @Test func aStreamBehindASlowAnswer() throws {
        try withServer { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("GET /slow?ms=150 HTTP/1.1\r\nHost: x\r\n\r\nGET /stream?count=1 HTTP/1.1\r\nHost: x\r\n\r\n")
            let first = try client.readResponse()
            #expect(first.bodyText.contains("\"/slow\""))
            _ = try client.read(until: "data: 0\n\n")
            #expect(handler.requestCount.load(ordering: .relaxed) == 2)
        }
    }

    /// FIN with answers owed: they are written, a half-sent request is dropped, then close.
    @Test func finAnswersWhatArrivedAndDropsTheHalfRequest() throws {
        try withServer { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("GET /slow?ms=150 HTTP/1.1\r\nHost: x\r\n\r\nGET /two HTTP/1.1\r\nHost: x\r\n\r\nGET /par")
            client.shutdownWrite()
            #expect(try client.readResponse().bodyText.contains("\"/slow\""))
            #expect(try client.readResponse().bodyText.contains("\"/two\""))
            #expect(client.readToEnd() == .closed)
            #expect(client.buffered.isEmpty)
            #expect(handler.requestCount.load(ordering: .relaxed) == 2)
            #expect(TestHandler.eventually { server.openConnectionCount == 0 })
        }
    }

    /// FIN with a body half sent: that request is dropped, the earlier one answered.
    @Test func finDuringABody() throws {
        try withServer { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("GET /slow?ms=150 HTTP/1.1\r\nHost: x\r\n\r\nPOST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
            client.shutdownWrite()
            #expect(try client.readResponse().bodyText.contains("\"/slow\""))
            #expect(client.readToEnd() == .closed)
            #expect(client.buffered.isEmpty)
            #expect(handler.requestCount.load(ordering: .relaxed) == 1)
        }
    }

    /// FIN with nothing owed: closed at once.
    @Test func finOnAnIdleConnection() throws {
        try withServer { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try client.readResponse()
            client.shutdownWrite()
            #expect(client.readToEnd() == .closed)
            #expect(TestHandler.eventually { server.openConnectionCount == 0 })
        }
    }

    /// Lingering: the client's later bytes are dropped (no reset), and the connection closes
    /// after the linger timeout even though the client never closes.
    @Test func lingerDropsBytesThenClosesAfterItsTimeout() throws {
        try withServer({ $0.lingerTimeout = .milliseconds(600) }) { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            _ = try client.readResponse()
            #expect(client.readToEnd() == .closed)
            try client.send(Array(repeating: UInt8(ascii: "z"), count: 10_000))
            usleep(200_000)
            #expect(server.openConnectionCount == 1, "still lingering")
            #expect(TestHandler.eventually { server.openConnectionCount == 0 })
        }
    }

    /// Lingering ends at once when the client closes, also when its FIN arrives behind more
    /// unread bytes than one read takes, after the server's own FIN (a hang-up both ways).
    @Test(arguments: [0, 1 << 20])
    func lingerEndsWithTheClientsFin(behind unreadBytes: Int) throws {
        try withServer({ $0.lingerTimeout = .seconds(5) }) { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            _ = try client.readResponse()
            #expect(client.readToEnd() == .closed)
            if unreadBytes > 0 { try client.send(Array(repeating: UInt8(ascii: "z"), count: unreadBytes)) }
            client.shutdownWrite()
            // A megabyte takes the loop a while to read and drop on a loaded machine.
            #expect(TestHandler.eventually(timeout: unreadBytes == 0 ? 1 : 2) { server.openConnectionCount == 0 },
                    "closed at the FIN, not after the linger timeout")
        }
    }

    /// A client that resets while the server reads nothing from it (a slow request is handled
    /// and the input buffered behind it is full) is closed at once, not when the answer comes:
    /// a reset is reported whatever the connection waits for (epoll's EPOLLHUP and EPOLLERR).
    @Test func aResetWhileNothingIsReadClosesTheConnection() throws {
        try withServer { server, handler in
            do {
                let client = try TestClient(port: server.port)
                let pipelined = String(repeating: "GET /a HTTP/1.1\r\nHost: x\r\n\r\n", count: 4_000)
                try client.send("GET /slow?ms=4000 HTTP/1.1\r\nHost: x\r\n\r\n" + pipelined)
                #expect(TestHandler.eventually { handler.requestCount.load(ordering: .relaxed) == 1 })
                usleep(100_000)
                #expect(server.openConnectionCount == 1)
                var abort = linger(l_onoff: 1, l_linger: 0)
                setsockopt(client.fd, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size))
            }
            #expect(TestHandler.eventually(timeout: 2) { server.openConnectionCount == 0 }, "closed at the reset")
        }
    }

    /// With linger off, the last answer's connection closes at once.
    @Test func noLinger() throws {
        try withServer({ $0.lingerTimeout = .zero }) { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            _ = try client.readResponse()
            #expect(client.readToEnd() == .closed)
            #expect(TestHandler.eventually(timeout: 1) { server.openConnectionCount == 0 })
        }
    }

    /// An answer the client leaves unread closes the connection after the idle timeout.
    @Test func unreadAnswerTimesOut() throws {
        try withServer({ $0.idleTimeout = .milliseconds(700) }) { server, _ in
            let client = try TestClient(port: server.port)
            client.setReceiveBuffer(4096)
            try client.send("GET /big?size=16000000 HTTP/1.1\r\nHost: x\r\n\r\n")
            usleep(300_000)
            #expect(server.openConnectionCount == 1)
            #expect(TestHandler.eventually { server.openConnectionCount == 0 })
        }
    }

    /// A large answer left unread is dropped after the stall timeout, long before the idle one,
    /// and with a reset: the kernel drops what the socket held instead of feeding it, for
    /// minutes, to a client that trickles.
    @Test func aLargeUnreadAnswerIsDroppedAfterTheStallTimeout() throws {
        try withServer({ $0.idleTimeout = .seconds(60); $0.streamStallTimeout = .milliseconds(700) }) { server, _ in
            let client = try TestClient(port: server.port)
            client.setReceiveBuffer(4096)
            try client.send("GET /big?size=16000000 HTTP/1.1\r\nHost: x\r\n\r\n")
            usleep(300_000)
            #expect(server.openConnectionCount == 1)
            #expect(TestHandler.eventually(timeout: 5) { server.openConnectionCount == 0 })
            #expect(client.readToEnd(timeout: 3) == .reset)
            #expect(client.buffered.count < 1 << 20, "what the socket held was dropped, not sent")
        }
    }

    /// The idle timeout after a request, the (shorter) header timeout before the first.
    @Test func idleAndFirstHeadTimeouts() throws {
        try withServer({ $0.headerTimeout = .milliseconds(400); $0.idleTimeout = .milliseconds(1500) }) { server, _ in
            let fresh = try TestClient(port: server.port)
            let served = try TestClient(port: server.port)
            try served.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try served.readResponse()
            let start = ContinuousClock.now
            #expect(fresh.waitForClose(timeout: 3))
            let freshClosed = ContinuousClock.now - start
            #expect(served.waitForClose(timeout: 3))
            let servedClosed = ContinuousClock.now - start
            #expect(freshClosed < .milliseconds(1000))
            #expect(servedClosed > .milliseconds(1000))
        }
    }

    /// A head sent after a request, slowly: 408.
    @Test func slowSecondHeadIs408() throws {
        try withServer({ $0.headerTimeout = .milliseconds(400) }) { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try client.readResponse()
            try client.send("GET /b HTTP/1.1\r\n")
            let response = try client.readResponse()
            #expect(response.status == 408)
            #expect(response.headers["X-Refused"] == "requestTimeout")
            #expect(client.readToEnd() == .closed)
        }
    }

    /// A stream the application closes with bytes its client does not read: closed after
    /// `streamCloseTimeout`, reason closedByServer.
    @Test func streamCloseTimesOut() throws {
        try withServer({ $0.streamCloseTimeout = .milliseconds(500); $0.streamBufferLimit = 8 << 20 }) { server, handler in
            let client = try TestClient(port: server.port)
            client.setReceiveBuffer(4096)
            try client.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(TestHandler.eventually { handler.streams.withLock { !$0.isEmpty } })
            let stream = try #require(handler.streams.withLock { $0.first })
            stream.send([UInt8](repeating: UInt8(ascii: "q"), count: 4 << 20))
            usleep(100_000)
            stream.close()
            usleep(200_000)
            #expect(server.openConnectionCount == 1)
            #expect(TestHandler.eventually { server.openConnectionCount == 0 })
            #expect(TestHandler.eventually { handler.closeReasons.withLock { $0 } == [.closedByServer] })
        }
    }

    /// At shutdown, a connection writing a large answer to a slow reader finishes it, then
    /// closes (it does not wait for a timeout), whether the request asked to close or not.
    @Test(arguments: ["Connection: close\r\n", ""])
    func shutdownLetsALargeAnswerFinishThenCloses(closeHeader: String) throws {
        let server = HTTPServer(
            configuration: .init(port: 0, loopCount: 1, idleTimeout: .seconds(20), lingerTimeout: .milliseconds(200)),
            handler: TestHandler())
        try server.start()
        defer { server.finishShutdown(deadline: .now + .seconds(1)) }
        let client = try TestClient(port: server.port)
        client.setReceiveBuffer(65536)
        try client.send("GET /big?size=16000000 HTTP/1.1\r\nHost: x\r\n\(closeHeader)\r\n")
        usleep(200_000)
        server.beginShutdown()
        usleep(100_000)
        let response = try client.readResponse()
        #expect(response.body.count == 16_000_000)
        #expect(client.readToEnd() == .closed)
        #expect(TestHandler.eventually { server.openConnectionCount == 0 })
    }

    /// At shutdown, an open stream stays open and carries what the application sends until the
    /// application closes it.
    @Test func shutdownKeepsAnOpenStreamUntilItIsClosed() throws {
        try withServer { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("GET /stream?count=1 HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try client.read(until: "data: 0\n\n")
            server.beginShutdown()
            usleep(100_000)
            let stream = try #require(handler.streams.withLock { $0.first })
            #expect(stream.isOpen)
            stream.send(Array("data: after\n\n".utf8))
            #expect(try client.read(until: "after\n\n") == "data: after\n\n")
            stream.close()
            #expect(client.readToEnd() == .closed)
            #expect(TestHandler.eventually { server.openConnectionCount == 0 })
        }
    }

    /// A "Connection: close" stream request: the stream carries on until closed, then closes.
    @Test func aStreamOnAConnectionCloseRequest() throws {
        try withServer { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("GET /stream?count=1 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            let head = try client.read(until: "\r\n\r\n")
            #expect(head.contains("Connection: close"))
            _ = try client.read(until: "data: 0\n\n")
            let stream = try #require(handler.streams.withLock { $0.first })
            stream.send(Array("data: 1\n\n".utf8))
            _ = try client.read(until: "data: 1\n\n")
            stream.close()
            #expect(client.readToEnd() == .closed)
            #expect(TestHandler.eventually { handler.closeReasons.withLock { $0 } == [.closedByServer] })
        }
    }
}
