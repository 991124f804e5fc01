#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import HTTP
import Synchronization
import Testing

@Suite struct LimitTests {
    /// The refusal, as the handler wrote it (status 599 replaced by the refusal's), closing.
    private func expectError(_ response: TestClient.Response, _ status: Int, _ kind: ProtocolError.Kind) {
        #expect(response.status == status)
        #expect(response.headers["X-Refused"] == "\(kind)")
        #expect(response.bodyText.hasPrefix(#"{"refused":"\#(kind)","message":""#))
        #expect(response.headers["Connection"] == "close")
        #expect(response.headers["Content-Type"] == "application/json; charset=utf-8")
    }

    @Test func requestLineTooLongIs414() throws {
        try withServer({ $0.maxRequestLineBytes = 100 }) { server, _ in
            let client = try TestClient(port: server.port)
            // No line end yet: refused as soon as the limit is passed.
            try client.send("GET /" + String(repeating: "a", count: 200))
            expectError(try client.readResponse(), 414, .uriTooLong)
            #expect(client.waitForClose())
        }
    }

    @Test func headerSectionTooLargeIs431() throws {
        try withServer({ $0.maxHeaderBytes = 200 }) { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "b", count: 300) + "\r\n\r\n")
            expectError(try client.readResponse(), 431, .headersTooLarge)
            #expect(client.waitForClose())
        }
    }

    /// A `HEAD` refused for its head (too large, or too slow) still gets no body: the bytes
    /// after the head would be read as the start of the next answer.
    @Test func aRefusedHEADHasNoBody() throws {
        try withServer({ $0.maxHeaderBytes = 200; $0.maxBodyBytes = 100; $0.headerTimeout = .milliseconds(300) }) { server, _ in
            for (request, status) in [("HEAD / HTTP/1.1\r\nHost: x\r\nX-Big: " + String(repeating: "b", count: 300) + "\r\n\r\n", 431),
                                      ("HEAD / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n", 413),
                                      ("HEAD / HTTP/1.1\r\nHost: x\r\n", 408)] {
                let client = try TestClient(port: server.port)
                try client.send(request)
                let head = try client.read(until: "\r\n\r\n")
                #expect(head.hasPrefix("HTTP/1.1 \(status) "), "\(head)")
                #expect(head.contains("Content-Length: "), "the length GET's answer would have")
                #expect(client.waitForClose())
                #expect(client.buffered.isEmpty, "nothing after the head: \(String(decoding: client.buffered, as: UTF8.self))")
            }
        }
    }

    @Test func bodyTooLargeByContentLengthIs413() throws {
        try withServer({ $0.maxBodyBytes = 100 }) { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n" + String(repeating: "z", count: 101))
            expectError(try client.readResponse(), 413, .payloadTooLarge)
            #expect(client.waitForClose())
            #expect(handler.requestCount.load(ordering: .relaxed) == 0)
        }
    }

    @Test func bodyTooLargeByChunkedTotalIs413() throws {
        try withServer({ $0.maxBodyBytes = 100 }) { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
            let chunk = "32\r\n" + String(repeating: "c", count: 50) + "\r\n"
            try client.send(chunk + chunk)
            try client.send(chunk)
            expectError(try client.readResponse(), 413, .payloadTooLarge)
            #expect(client.waitForClose())
        }
    }

    @Test func slowLorisHeadTimesOutWith408() throws {
        try withServer({ $0.headerTimeout = .milliseconds(400) }) { server, _ in
            let client = try TestClient(port: server.port)
            let start = ContinuousClock.now
            // One byte every 100 ms never completes the head.
            var answer: [UInt8] = []
            for byte in "GET /echo HTTP/1.1\r\nHost: slow\r\nX-Loris: 1".utf8 {
                guard (try? client.send([byte])) != nil else { break }
                usleep(100_000)
                if ContinuousClock.now - start > .milliseconds(900) { break }
            }
            answer = client.buffered
            let response = try client.readResponse()
            expectError(response, 408, .requestTimeout)
            #expect(ContinuousClock.now - start < .milliseconds(1500))
            #expect(answer.isEmpty || answer.starts(with: Array("HTTP/1.1 408".utf8)))
            #expect(client.waitForClose())
        }
    }

    @Test func bodyThatStallsTimesOutWith408() throws {
        try withServer({ $0.bodyTimeout = .milliseconds(300) }) { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nabc")
            expectError(try client.readResponse(), 408, .requestTimeout)
            #expect(client.waitForClose())
        }
    }

    /// A client that has sent a POST's head and the first `sent` bytes (x's) of its body.
    private func posting(_ port: Int, _ path: String = "/echo", length: Int, sent: Int) throws -> TestClient {
        let client = try TestClient(port: port, timeout: 10)
        try client.send("POST \(path) HTTP/1.1\r\nHost: x\r\nContent-Length: \(length)\r\n\r\n" + String(repeating: "x", count: sent))
        return client
    }

    /// Bodies arriving on many connections at once are bounded together (`maxBufferedBodies`),
    /// counted as their bytes arrive: the body whose bytes would take them past the bound is
    /// refused at once with 503 (not a sweep later, when a burst could have piled up far more),
    /// and the others go on.
    @Test func aBodyPastTheServersBoundIsRefusedAsItArrives() throws {
        try withServer({
            $0.maxBufferedBodies = 100_000
            $0.bodyTimeout = .seconds(30)
        }) { server, _ in
            let first = try posting(server.port, length: 90_000, sent: 60_000)
            #expect(TestHandler.eventually { server.bufferedBodyBytes == 60_000 }, "counted as it arrives")
            // A second body, from a thread of its own: the first goes on sending meanwhile, a
            // byte every 20 ms, since one that paused half a second while the server is pressed
            // could be shed with 408.
            let refusal = Mutex<(status: Int, refused: String?, closed: Bool)?>(nil)
            let port = server.port
            let answered = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                defer { answered.signal() }
                guard let second = try? TestClient(port: port, timeout: 10),
                      (try? second.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 120000\r\n\r\n" + String(repeating: "x", count: 60_000))) != nil,
                      let response = try? second.readResponse() else { return }
                refusal.withLock { $0 = (response.status, response.headers["X-Refused"], second.waitForClose()) }
            }
            for _ in 0..<50 {
                try first.send("x")
                usleep(20_000)
            }
            answered.wait()
            let refused = try #require(refusal.withLock { $0 })
            #expect(refused.status == 503 && refused.refused == "overCapacity" && refused.closed)
            #expect(TestHandler.eventually { server.bufferedBodyBytes == 60_050 }, "the refused body is let go")
            // The first was within the bound: it completes.
            try first.send(String(repeating: "x", count: 29_950))
            let served = try first.readResponse()
            #expect(served.status == 200 && served.body.count > 90_000)
            #expect(TestHandler.eventually { server.bufferedBodyBytes == 0 }, "a finished body is let go")
        }
    }

    /// A body that has arrived whole still counts until its request is answered: requests
    /// waiting for a busy handler hold their bodies as surely as requests still arriving. Small
    /// bodies (16 KiB or less) are left out, as a connection's own overhead.
    @Test func aBodyWaitingForItsAnswerCountsTowardTheBound() throws {
        try withServer({ $0.maxBufferedBodies = 100_000 }) { server, _ in
            let waiting = try posting(server.port, "/slow?ms=1500", length: 60_000, sent: 60_000)
            #expect(TestHandler.eventually { server.bufferedBodyBytes == 60_000 }, "counted while it waits for its answer")
            let refused = try posting(server.port, length: 60_000, sent: 60_000)
            let answer = try refused.readResponse()
            #expect(answer.status == 503 && answer.headers["X-Refused"] == "overCapacity")
            let small = try posting(server.port, "/slow?ms=300", length: 10_000, sent: 10_000)
            #expect(try small.readResponse().status == 200, "a small body is served past the bound")
            #expect(try waiting.readResponse().status == 200)
            #expect(TestHandler.eventually { server.bufferedBodyBytes == 0 }, "given back once answered")
        }
    }

    /// Stalled bodies are what a client holds at no cost to itself: once a body was refused for
    /// the bound, those whose clients stopped sending get 408 within a second or so, not after
    /// the body timeout, so that clients with a body to send get the room; a client that keeps
    /// sending is left alone.
    @Test func stalledBodiesAre408OnceTheBoundRefusedOne() throws {
        try withServer({
            $0.maxBufferedBodies = 150_000
            $0.bodyTimeout = .seconds(30)
        }) { server, _ in
            let stalled = try (0..<3).map { _ in try posting(server.port, length: 200_000, sent: 40_000) }
            #expect(TestHandler.eventually { server.bufferedBodyBytes == 120_000 })
            // A byte every 20 ms: well within the two sweeps (half a second) a sender may pause,
            // even on a busy machine that is late to wake this thread.
            let sending = try posting(server.port, length: 100, sent: 0)
            let started = ContinuousClock.now
            let refused = try posting(server.port, length: 200_000, sent: 40_000)
            #expect(try refused.readResponse().status == 503, "past the bound")
            for _ in 0..<100 {
                try sending.send("x")
                usleep(20_000)
            }
            for client in stalled {
                expectError(try client.readResponse(), 408, .requestTimeout)
            }
            #expect(ContinuousClock.now - started < .seconds(15), "well before the 30 s body timeout")
            #expect(try sending.readResponse().status == 200, "a client that sends is left alone")
            // With the stalled ones gone, a body that did not fit before fits now.
            let retried = try posting(server.port, length: 80_000, sent: 40_000)
            try retried.send(String(repeating: "x", count: 40_000))
            #expect(try retried.readResponse().status == 200)
        }
    }

    @Test func silentConnectionIsClosedAfterHeaderTimeout() throws {
        try withServer({ $0.headerTimeout = .milliseconds(300) }) { server, _ in
            let client = try TestClient(port: server.port)
            #expect(client.waitForClose(timeout: 3))
            #expect(client.buffered.isEmpty)
        }
    }

    @Test func overCapacityConnectionGets503() throws {
        try withServer({ $0.maxConnections = 2 }) { server, _ in
            let first = try TestClient(port: server.port)
            let second = try TestClient(port: server.port)
            #expect(TestHandler.eventually { server.openConnectionCount == 2 })
            let third = try TestClient(port: server.port)
            let refused = try third.readResponse()
            #expect(refused.status == 503)
            #expect(refused.headers["X-Refused"] == "overCapacity")
            #expect(third.waitForClose())
            // The admitted ones still work, and a slot frees up when one leaves.
            try first.send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try first.readResponse().status == 200)
            try second.send("GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            #expect(try second.readResponse().status == 200)
            #expect(second.waitForClose())
            withExtendedLifetime(second) {}
            #expect(TestHandler.eventually { server.openConnectionCount == 1 })
            let fourth = try TestClient(port: server.port)
            try fourth.send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try fourth.readResponse().status == 200)
        }
    }

    /// A client that pipelines requests and reads none of the answers gets only a bounded
    /// number of them made: what waits for it, in navd's buffer and the kernel's (fixed, not
    /// grown to 4 MiB as Linux would for a client that does not read), is bounded.
    @Test func answersLeftUnreadStopTheRequestsBehindThem() throws {
        try withServer { server, handler in
            let client = try TestClient(port: server.port, timeout: 10)
            let size = 256 * 1024
            try client.send(String(repeating: "GET /big?size=\(size) HTTP/1.1\r\nHost: x\r\n\r\n", count: 40))
            usleep(1_000_000)
            let made = handler.requestCount.load(ordering: .relaxed)
            #expect(made >= 1 && made <= 8, "\(made) answers of 256 KiB made for a client that reads none")
            for _ in 0..<40 { #expect(try client.readResponse().body.count == size) }
        }
    }

    /// The 503 at the connection limit is written before the request arrives; the request
    /// (a body of 256 KiB, then one of 4 MiB, more than the socket buffers hold, sent a moment
    /// later) is read and dropped before the close, so the client sends it whole, then reads
    /// the whole 503 and a clean close, never a reset.
    @Test func overCapacityDrainsTheRequestBeforeClosing() throws {
        try withServer({ $0.maxConnections = 1 }) { server, _ in
            let admitted = try TestClient(port: server.port)
            try admitted.send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try admitted.readResponse().status == 200)
            for size in [256 << 10, 4 << 20] {
                let refused = try TestClient(port: server.port)
                usleep(100_000)
                let body = String(repeating: "b", count: size)
                try refused.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body)
                let response = try refused.readResponse()
                #expect(response.status == 503)
                #expect(response.headers["Connection"] == "close")
                #expect(refused.readToEnd() == .closed)
            }
        }
    }
}
