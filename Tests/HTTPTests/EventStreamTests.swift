import Dispatch
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTP
import Testing

@Suite struct EventStreamTests {
    /// A stream whose client reads nothing, with a small receive buffer, so what is sent
    /// stays in the server's queue.
    private func withUnreadStream(_ server: HTTPServer, _ handler: TestHandler, _ body: (EventStream) throws -> Void) throws {
        let client = try TestClient(port: server.port)
        client.setReceiveBuffer(4096)
        try client.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(TestHandler.eventually { handler.streams.withLock { !$0.isEmpty } })
        let stream = try #require(handler.streams.withLock { $0.first })
        try withExtendedLifetime(client) { try body(stream) }
    }

    /// A stream whose client has read the response head, with one message of `bytes` queued for
    /// it: where the slow-reader tests start, each reading at its own pace.
    private func streamWithLargeMessage(_ server: HTTPServer, _ handler: TestHandler, bytes: Int,
                                        receiveBuffer: Int32? = nil) throws -> (TestClient, EventStream) {
        let client = try TestClient(port: server.port, receiveBuffer: receiveBuffer)
        try client.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        _ = try client.read(until: "\r\n\r\n")
        let stream = try #require(handler.streams.withLock { $0.first })
        #expect(stream.send([UInt8](repeating: UInt8(ascii: "s"), count: bytes)))
        return (client, stream)
    }

    /// A stream whose application sends as fast as the socket takes (a reader that keeps up,
    /// big socket buffers) does not hold its loop: another connection on the same loop is
    /// answered within a bound, request after request.
    @Test func aFloodedStreamDoesNotStarveItsLoop() throws {
        try withServer({
            $0.loopCount = 1
            $0.streamBufferLimit = 64 << 20
            $0.streamSendBuffer = 4 << 20
        }) { server, handler in
            let flooded = try TestClient(port: server.port)
            flooded.setReceiveBuffer(4 << 20)
            try flooded.send("GET /flood?size=512 HTTP/1.1\r\nHost: x\r\n\r\n")
            let reading = Atomic<Bool>(true)
            let received = Atomic<Int>(0)
            let done = DispatchSemaphore(value: 0)
            let fd = flooded.fd
            DispatchQueue(label: "flood-reader").async {
                var chunk = [UInt8](repeating: 0, count: 1 << 20)
                while reading.load(ordering: .relaxed) {
                    // MSG_TRUNC: Linux drops the bytes without copying them, so this reader
                    // outpaces any writer and the stream's socket never fills.
                    let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_TRUNC)) }
                    if count <= 0 { break }
                    received.add(count, ordering: .relaxed)
                }
                done.signal()
            }
            #expect(TestHandler.eventually { received.load(ordering: .relaxed) > 64 << 20 })
            let other = try TestClient(port: server.port, timeout: 5)
            var slowest: Duration = .zero
            for index in 0..<30 {
                usleep(20_000)
                let start = ContinuousClock.now
                try other.send("GET /echo?n=\(index) HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(try other.readResponse().status == 200)
                slowest = max(slowest, ContinuousClock.now - start)
            }
            #expect(slowest < .milliseconds(200), "slowest answer beside the flood: \(slowest)")
            let stream = try #require(handler.streams.withLock { $0.first })
            #expect(stream.isOpen, "the flood kept within its limit")
            stream.close()
            reading.store(false, ordering: .relaxed)
            shutdownSocket(fd, Int32(SHUT_RDWR))
            done.wait()
        }
    }

    @Test func deliversEventsAndReportsClientClose() throws {
        try withServer { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("GET /stream?count=3 HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try client.read(until: "\r\n\r\n")
            #expect(head.hasPrefix("HTTP/1.1 200 OK\r\n"))
            #expect(head.contains("Content-Type: text/event-stream\r\n"))
            #expect(head.contains("Cache-Control: no-cache\r\n"))
            #expect(head.contains("X-Accel-Buffering: no\r\n"))
            // Framed by the connection's end, which the head says.
            #expect(head.contains("Connection: close\r\n"))
            #expect(!head.contains("Content-Length"))
            #expect(!head.contains("Transfer-Encoding"))
            #expect(try client.read(until: "data: 2\n\n") == "data: 0\n\ndata: 1\n\ndata: 2\n\n")

            // Later events from another thread, one shared array for the stream.
            let stream = try #require(handler.streams.withLock { $0.first })
            let event = Array("data: later\n\n".utf8)
            #expect(stream.send(event))
            #expect(try client.read(until: "later\n\n") == "data: later\n\n")
            // Bytes the client sends are read and dropped.
            try client.send("ignored")
            #expect(stream.isOpen)

            shutdownSocket(client.fd, Int32(SHUT_RDWR))
            #expect(TestHandler.eventually { handler.closeReasons.withLock { $0 } == [.clientClosed] })
            #expect(!stream.isOpen)
            #expect(!stream.send(event))
            // A handler set after the end is called at once.
            let late = LateReason()
            stream.onClose { reason in late.reason.withLock { $0 = reason } }
            #expect(late.reason.withLock { $0 } == .clientClosed)
        }
    }

    @Test func clientThatNeverReadsIsClosedAsTooSlow() throws {
        try withServer({ $0.streamBufferLimit = 64 * 1024 }) { server, handler in
            try withUnreadStream(server, handler) { stream in
                let payload = [UInt8](repeating: UInt8(ascii: "p"), count: 16 * 1024)
                var accepted = 0
                let start = ContinuousClock.now
                while stream.send(payload), ContinuousClock.now - start < .seconds(10) {
                    accepted += 1
                    usleep(200)
                }
                #expect(!stream.isOpen)
                #expect(TestHandler.eventually { handler.closeReasons.withLock { $0 } == [.tooSlow] })
                #expect(TestHandler.eventually { server.openConnectionCount == 0 })
                // The limit's worth at least (four 16 KiB messages, more as far as the kernel took
                // some before the loop was next scheduled, which on a busy machine may be none), and
                // far from unbounded: the queue's limit and the socket's fixed buffers, under 1 MiB.
                #expect(accepted >= 4)
                #expect(accepted < 64)
            }
        }
    }

    /// Each stream within its own limit, many behind at once pass the server's bound: then the
    /// ones whose clients take nothing are closed, within two sweeps, until what waits fits again.
    @Test func clientsBehindTogetherPastTheServersBoundAreClosed() throws {
        func unreadStreams(_ server: HTTPServer, _ handler: TestHandler, _ count: Int) throws -> ([TestClient], [EventStream]) {
            var clients: [TestClient] = []
            for index in 0..<count {
                let client = try TestClient(port: server.port, receiveBuffer: 4096)
                try client.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(TestHandler.eventually { handler.streams.withLock { $0.count == index + 1 } })
                clients.append(client)
            }
            return (clients, handler.streams.withLock { $0 })
        }
        let payload = [UInt8](repeating: UInt8(ascii: "p"), count: 16 * 1024)
        // Unbounded, four streams 320 KiB behind each stay open: within their own 1 MiB, and
        // the stall timeout is a minute.
        try withServer({ $0.streamStallTimeout = .seconds(60) }) { server, handler in
            let (clients, streams) = try unreadStreams(server, handler, 4)
            for _ in 0..<20 { for stream in streams { #expect(stream.send(payload)) } }
            usleep(1_000_000)
            #expect(streams.allSatisfy { $0.isOpen })
            #expect(server.bufferedOutputBytes == 0, "counted only under a bound")
            withExtendedLifetime(clients) {}
        }
        try withServer({ $0.streamStallTimeout = .seconds(60); $0.maxBufferedOutput = 512 * 1024 }) { server, handler in
            let (clients, streams) = try unreadStreams(server, handler, 4)
            for _ in 0..<20 { for stream in streams where stream.isOpen { _ = stream.send(payload) } }
            // Closed until the rest fit: each loop closes its own streams far behind when it sees
            // the total past the bound, and counts what is left.
            #expect(TestHandler.eventually { !streams.allSatisfy { $0.isOpen } })
            // What is left is counted as it is (none, when both loops saw the total at once).
            #expect(TestHandler.eventually {
                server.bufferedOutputBytes <= 512 * 1024
                    && server.bufferedOutputBytes == streams.filter { $0.isOpen }.reduce(0) { $0 + $1.queuedByteCount }
            })
            #expect(TestHandler.eventually { handler.closeReasons.withLock { $0 }.count == streams.filter { !$0.isOpen }.count })
            let closed = handler.closeReasons.withLock { $0 }
            #expect(!closed.isEmpty && closed.allSatisfy { $0 == .tooSlow }, "\(closed)")
            withExtendedLifetime(clients) {}
        }
    }

    /// Over the server's bound, a client that reads keeps its stream however far behind it is:
    /// only those that take nothing are closed.
    @Test func overTheServersBoundAClientThatReadsSlowlyKeepsItsStream() throws {
        try withServer({ $0.streamStallTimeout = .seconds(60); $0.maxBufferedOutput = 256 * 1024 }) { server, handler in
            let reader = try TestClient(port: server.port, receiveBuffer: 4096)
            try reader.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try reader.read(until: "\r\n\r\n")
            let idle = try TestClient(port: server.port, receiveBuffer: 4096)
            try idle.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(TestHandler.eventually { handler.streams.withLock { $0.count == 2 } })
            let (readStream, idleStream) = handler.streams.withLock { ($0[0], $0[1]) }
            let message = [UInt8](repeating: UInt8(ascii: "m"), count: 512 * 1024)
            #expect(readStream.send(message) && idleStream.send(message))
            // About 160 KB a second: over three seconds to take it all, far behind all along.
            var taken = 0
            while taken < message.count {
                taken += try reader.read(count: min(16 * 1024, message.count - taken)).count
                usleep(100_000)
                if taken > 128 * 1024 { #expect(!idleStream.isOpen || TestHandler.eventually { !idleStream.isOpen }) }
            }
            #expect(readStream.isOpen, "read all the while, never cut")
            #expect(handler.closeReasons.withLock { $0 } == [.tooSlow])
            withExtendedLifetime(idle) {}
        }
    }

    @Test func oneMessageLargerThanTheLimitReachesAReaderThatKeepsUp() throws {
        try withServer({ $0.streamBufferLimit = 64 * 1024 }) { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try client.read(until: "\r\n\r\n")
            let stream = try #require(handler.streams.withLock { $0.first })
            // The limit bounds the backlog, not a message: a large snapshot to a fresh stream goes out.
            let large = Array("data: \(String(repeating: "x", count: 200_000))\n\n".utf8)
            #expect(stream.send(large))
            #expect(try client.read(count: large.count) == large)
            #expect(stream.isOpen)
        }
    }

    /// The snapshot case: a first message beyond the limit is queued whole, but held only while
    /// the client reads it.
    @Test func oneMessageLargerThanTheLimitIsDroppedWithTheStreamWhenTheClientDoesNotRead() throws {
        try withServer({ $0.streamBufferLimit = 64 * 1024; $0.streamStallTimeout = .milliseconds(300) }) { server, handler in
            try withUnreadStream(server, handler) { stream in
                let large = [UInt8](repeating: UInt8(ascii: "s"), count: 4 << 20)
                #expect(stream.send(large))
                // Nothing else is sent (no heartbeat, no event) that could trip the limit instead.
                #expect(TestHandler.eventually { handler.closeReasons.withLock { $0 } == [.tooSlow] })
                #expect(stream.queuedByteCount == 0)
                #expect(TestHandler.eventually { server.openConnectionCount == 0 })
            }
        }
    }

    /// Linux would grow the socket's send buffer to 4 MiB for a client that does not read, and
    /// those bytes would escape the limit; a stream's socket keeps a small fixed one.
    @Test func anUnreadStreamsBytesWaitInItsQueueWhereTheLimitApplies() throws {
        try withServer({ $0.streamBufferLimit = 2 << 20; $0.streamSendBuffer = 64 * 1024 }) { server, handler in
            try withUnreadStream(server, handler) { stream in
                #expect(stream.send([UInt8](repeating: UInt8(ascii: "q"), count: 1_500_000)))
                usleep(300_000)
                // The kernel took no more than its fixed buffer (Linux reserves twice the setting).
                #expect(stream.queuedByteCount > 1_500_000 - 256 * 1024, "\(stream.queuedByteCount) bytes still queued")
                #expect(stream.isOpen)
            }
        }
    }

    @Test func aSlowReaderOfALargeFirstMessageKeepsItsStream() throws {
        try withServer({ $0.streamBufferLimit = 64 * 1024; $0.streamStallTimeout = .seconds(1) }) { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try client.read(until: "\r\n\r\n")
            let stream = try #require(handler.streams.withLock { $0.first })
            let large = [UInt8](repeating: UInt8(ascii: "s"), count: 4 << 20)
            #expect(stream.send(large))
            // Reading in steps takes longer than the stall timeout in all, but the socket never
            // stands still that long, and the stream survives.
            var received = 0
            let start = ContinuousClock.now
            while received < large.count {
                received += try client.read(count: min(64 * 1024, large.count - received)).count
                usleep(30_000)
            }
            #expect(ContinuousClock.now - start > .seconds(1))
            #expect(stream.isOpen)
            #expect(handler.closeReasons.withLock { $0 }.isEmpty)
        }
    }

    /// A snapshot over the limit, then events while the client is still reading it: the
    /// events wait behind it, and the client gets everything, in order, on the same stream.
    @Test func eventsFollowingALargeMessageWaitBehindItForAReader() throws {
        try withServer({ $0.streamBufferLimit = 64 * 1024; $0.streamSendBuffer = 16 * 1024 }) { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try client.read(until: "\r\n\r\n")
            let stream = try #require(handler.streams.withLock { $0.first })
            let large = Array("data: \(String(repeating: "s", count: 1 << 20))\n\n".utf8)
            #expect(stream.send(large))
            var expected = large
            // Each of these arrives while most of the snapshot is still queued.
            for index in 0..<20 {
                let event = Array("data: \(index) \(String(repeating: "e", count: 1000))\n\n".utf8)
                #expect(stream.send(event), "event \(index) behind the snapshot")
                expected += event
            }
            #expect(stream.queuedByteCount > 64 * 1024, "the events queued while the snapshot was over the limit")
            #expect(try client.read(count: expected.count) == expected)
            #expect(stream.isOpen)
            #expect(handler.closeReasons.withLock { $0 }.isEmpty)
        }
    }

    /// What waits behind a large message is held to the limit: a client that does not read
    /// is cut off once the events behind it pass the limit, without waiting for the stall.
    @Test func theBacklogBehindALargeMessageIsBounded() throws {
        try withServer({ $0.streamBufferLimit = 64 * 1024; $0.streamStallTimeout = .seconds(60) }) { server, handler in
            try withUnreadStream(server, handler) { stream in
                #expect(stream.send([UInt8](repeating: UInt8(ascii: "s"), count: 1 << 20)))
                let event = [UInt8](repeating: UInt8(ascii: "e"), count: 16 * 1024)
                var accepted = 0
                while stream.send(event), accepted < 100 { accepted += 1 }
                #expect(accepted == 4, "64 KiB of 16 KiB events behind the large one")
                #expect(!stream.isOpen)
                #expect(TestHandler.eventually { handler.closeReasons.withLock { $0 } == [.tooSlow] })
                #expect(stream.queuedByteCount == 0)
            }
        }
    }

    /// A message over the limit goes only into an empty queue: behind another, even with
    /// nothing else waiting, it would be a backlog over the limit.
    @Test func aMessageOverTheLimitBehindAnotherClosesTheStream() throws {
        try withServer({ $0.streamBufferLimit = 64 * 1024; $0.streamStallTimeout = .seconds(60) }) { server, handler in
            try withUnreadStream(server, handler) { stream in
                #expect(stream.send([UInt8](repeating: UInt8(ascii: "s"), count: 1 << 20)))
                #expect(!stream.send([UInt8](repeating: UInt8(ascii: "l"), count: 65 * 1024)))
                #expect(TestHandler.eventually { handler.closeReasons.withLock { $0 } == [.tooSlow] })
            }
        }
    }

    /// A client that reads a large message steadily but slowly frees too little of a big socket
    /// buffer for the kernel to report room within the stall timeout (it waits for a third of
    /// the buffer): the socket shows the client taking bytes all the same, and it keeps its stream.
    @Test func aSlowReaderTheKernelReportsNoRoomForKeepsItsStream() throws {
        try withServer({ $0.streamBufferLimit = 64 * 1024; $0.streamStallTimeout = .seconds(2); $0.streamSendBuffer = 1 << 20 }) { server, handler in
            let (client, stream) = try streamWithLargeMessage(server, handler, bytes: 8 << 20)
            // About 200 KB a second for 3 s: the kernel reports room after some 700 KB, later
            // than the stall timeout, while the client's window opens every half second or so.
            let start = ContinuousClock.now
            var received = 0
            while ContinuousClock.now - start < .seconds(3) {
                received += try client.read(count: 20_000).count
                usleep(100_000)
            }
            #expect(received > 300_000)
            #expect(stream.isOpen)
            #expect(handler.closeReasons.withLock { $0 }.isEmpty)
            stream.close()
        }
    }

    /// A client that takes a few bytes now and then does not count as reading: what waits
    /// for it would be held for hours. It is cut off like one that takes nothing.
    @Test func aClientThatTricklesIsCutOffAsTooSlow() throws {
        try withServer({ $0.streamBufferLimit = 64 * 1024; $0.streamStallTimeout = .seconds(1) }) { server, handler in
            let (client, stream) = try streamWithLargeMessage(server, handler, bytes: 4 << 20, receiveBuffer: 1)
            // A few hundred bytes every 300 ms: about 2 KB a second, under the 16 KiB per stall
            // timeout a reader must take, though the socket sees them taken.
            let start = ContinuousClock.now
            var received = 0
            while stream.isOpen, ContinuousClock.now - start < .seconds(4) {
                received += (try? client.read(count: 500).count) ?? 0
                usleep(300_000)
            }
            #expect(received > 0)
            #expect(!stream.isOpen)
            #expect(TestHandler.eventually { handler.closeReasons.withLock { $0 } == [.tooSlow] })
        }
    }

    @Test func closeFlushesQueuedEventsThenCloses() throws {
        try withServer { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("GET /stream?count=2 HTTP/1.1\r\nHost: x\r\n\r\nGET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try client.read(until: "\r\n\r\n")
            let stream = try #require(handler.streams.withLock { $0.first })
            stream.send(Array("data: last\n\n".utf8))
            stream.close()
            #expect(!stream.send(Array("data: too late\n\n".utf8)))
            #expect(client.waitForClose())
            let rest = String(decoding: client.buffered, as: UTF8.self)
            #expect(rest == "data: 0\n\ndata: 1\n\ndata: last\n\n")
            #expect(TestHandler.eventually { handler.closeReasons.withLock { $0 } == [.closedByServer] })
            // The pipelined request after the stream was never served.
            #expect(handler.requestCount.load(ordering: .relaxed) == 1)
        }
    }

    @Test func streamsAreExemptFromIdleTimeout() throws {
        try withServer({ $0.idleTimeout = .milliseconds(200) }) { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("GET /stream?count=1 HTTP/1.1\r\nHost: x\r\n\r\n")
            _ = try client.read(until: "data: 0\n\n")
            usleep(600_000)
            let stream = try #require(handler.streams.withLock { $0.first })
            #expect(stream.isOpen)
            stream.send(Array("data: still\n\n".utf8))
            #expect(try client.read(until: "still\n\n") == "data: still\n\n")
        }
    }

    @Test func oneArraySharedByManyStreams() throws {
        try withServer { server, handler in
            let clients = try (0..<20).map { _ in try TestClient(port: server.port) }
            for client in clients { try client.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n") }
            #expect(TestHandler.eventually { handler.streams.withLock { $0.count } == 20 })
            let event = Array("data: broadcast\n\n".utf8)
            for stream in handler.streams.withLock({ $0 }) { #expect(stream.send(event)) }
            for client in clients {
                _ = try client.read(until: "\r\n\r\n")
                #expect(try client.read(until: "broadcast\n\n") == "data: broadcast\n\n")
            }
        }
    }

    @Test func secondAnswerIsIgnored() throws {
        final class Twice: HTTPHandler {
            func handle(_ request: HTTPRequest, responder: HTTPResponder) {
                responder.respond(HTTPResponse(status: 201, body: Array("first".utf8)))
                responder.respond(HTTPResponse(status: 500))
                let stream = responder.startEventStream(headers: [:])
                #expect(!stream.isOpen)
                #expect(!stream.send([1]))
            }
        }
        let server = HTTPServer(configuration: .init(port: 0, loopCount: 1, backend: .underTest), handler: Twice())
        try server.start()
        defer { server.finishShutdown(deadline: .now + .seconds(1)) }
        let client = try TestClient(port: server.port)
        for _ in 0..<2 {
            try client.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 201)
            #expect(response.bodyText == "first")
        }
    }
}

private final class LateReason: Sendable {
    let reason = Mutex<EventStreamCloseReason?>(nil)
}
