import Foundation
import HTTP
import Testing

@Suite struct BodyTests {
    @Test func contentLengthBody() throws {
        try withServer { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello")
            usleep(50_000)
            try client.send(" world")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.bodyText.contains("\"body\":\"hello world\""))
            #expect(response.bodyText.contains("\"method\":\"POST\""))
        }
    }

    @Test func chunkedBodyWithExtensionAndTrailer() throws {
        try withServer { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4;ext=1\r\nWiki\r\n")
            usleep(30_000)
            try client.send("5\r\npedia\r\n0\r\nX-Trailer: yes\r\n\r\nGET /echo?after=1 HTTP/1.1\r\nHost: x\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.bodyText.contains("\"body\":\"Wikipedia\""))
            let next = try client.readResponse()
            #expect(next.bodyText.contains("after=1"))
        }
    }

    @Test(arguments: [
        ("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", 400),
        ("Content-Length: -5\r\n", 400),
        ("Content-Length: 123456789012345678901234567890\r\n", 400),
        ("Content-Length: 3\r\nContent-Length: 4\r\n", 400),
        ("Transfer-Encoding: gzip, chunked\r\n", 501),
    ])
    func badFramingIsRefused(_ fields: String, _ status: Int) throws {
        try withServer { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\n\(fields)\r\nabc")
            let response = try client.readResponse()
            #expect(response.status == status)
            #expect(response.headers["Connection"] == "close")
            // Written by the handler, as a refusal.
            #expect(response.headers["X-Refused"] != nil)
            #expect(client.waitForClose())
            #expect(handler.requestCount.load(ordering: .relaxed) == 0)
        }
    }

    /// A body in a coding navd does not decode is refused for its body alone: the handler is
    /// told which request it refuses, for its answer and its log.
    @Test func aRefusedTransferCodingNamesItsRequest() throws {
        try withServer { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nabc")
            let response = try client.readResponse()
            #expect(response.status == 501)
            #expect(response.headers["X-Refused"] == "notImplemented")
            #expect(response.bodyText.contains(#""path":"/echo""#), "\(response.bodyText)")
            #expect(client.waitForClose())
        }
    }

    @Test func expectContinueGetsInterimResponseBeforeBody() throws {
        try withServer { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("PUT /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
            let interim = try client.read(count: 25)
            #expect(String(decoding: interim, as: UTF8.self) == "HTTP/1.1 100 Continue\r\n\r\n")
            try client.send("data")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.bodyText.contains("\"body\":\"data\""))
        }
    }

    /// The handler may refuse a request before its body: no interim answer, the refusal, and
    /// a clean close, the body sent anyway drained rather than reset.
    @Test func expectContinueRefusedByTheHandlerIsAnsweredWithoutTheBody() throws {
        try withServer { server, handler in
            let client = try TestClient(port: server.port)
            try client.send("PUT /refuse-body HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 100000\r\n\r\n")
            let head = try client.read(until: "\r\n\r\n")
            #expect(head.hasPrefix("HTTP/1.1 403 "), "\(head)")
            #expect(head.contains("Connection: close\r\n"))
            #expect(try client.read(count: 12) == Array("not this one".utf8))
            try? client.send(String(repeating: "b", count: 100_000))
            #expect(client.readToEnd() == .closed)
            #expect(client.buffered.isEmpty)
            #expect(handler.requestCount.load(ordering: .relaxed) == 0)
            // Without Expect the handler is not asked: the body comes with the head.
            let plain = try TestClient(port: server.port)
            try plain.send("PUT /refuse-body HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\ndata")
            #expect(try plain.readResponse().status == 200)
        }
    }

    @Test func expectContinueOverLimitIsAnswered413AtOnce() throws {
        try withServer({ $0.maxBodyBytes = 100 }) { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("PUT /echo HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1000\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 413)
            #expect(response.headers["X-Refused"] == "payloadTooLarge")
            // The head was read whole: the handler is told which request it refuses.
            #expect(response.bodyText.contains(#""path":"/echo""#))
            #expect(client.waitForClose())
        }
    }

    @Test func curlPostsAFileWithExpectContinue() throws {
        let curl = "/usr/bin/curl"
        guard FileManager.default.isExecutableFile(atPath: curl) else { return }
        try withServer { server, _ in
            let file = FileManager.default.temporaryDirectory.appendingPathComponent("http-test-\(UInt32.random(in: 0...UInt32.max)).txt")
            let payload = String(repeating: "abcdefgh", count: 300)  // 2400 bytes: curl sends Expect
            try payload.write(to: file, atomically: true, encoding: .utf8)
            defer { try? FileManager.default.removeItem(at: file) }
            let process = Process()
            process.executableURL = URL(fileURLWithPath: curl)
            process.arguments = ["-s", "-v", "--max-time", "5", "-H", "Expect: 100-continue",
                                 "-d", "@\(file.path)", "http://127.0.0.1:\(server.port)/echo"]
            let output = Pipe()
            let errors = Pipe()
            process.standardOutput = output
            process.standardError = errors
            try process.run()
            let body = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            let trace = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            #expect(trace.contains("100 Continue"))
            #expect(body.contains(payload))
        }
    }

    @Test func headOmitsBodyButKeepsLength() throws {
        try withServer { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("HEAD /big?size=1234 HTTP/1.1\r\nHost: x\r\n\r\n")
            let head = try client.readResponse(head: true)
            #expect(head.status == 200)
            #expect(head.headers["Content-Length"] == "1234")
            // The next response follows directly: nothing of the body was sent.
            try client.send("GET /big?size=3 HTTP/1.1\r\nHost: x\r\n\r\n")
            let next = try client.readResponse()
            #expect(next.bodyText == "xxx")
        }
    }

    @Test func largeResponseToSlowReaderDoesNotBlockTheLoop() throws {
        try withServer({ $0.loopCount = 1 }) { server, _ in
            // 16 MB is more than the loopback socket buffers hold, so the write must wait.
            let slow = try TestClient(port: server.port)
            try slow.send("GET /big?size=16000000 HTTP/1.1\r\nHost: x\r\n\r\n")
            usleep(200_000)
            // The only loop is still serving others while the big response waits on EPOLLOUT.
            let other = try TestClient(port: server.port)
            try other.send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try other.readResponse().status == 200)
            let response = try slow.readResponse()
            #expect(response.body.count == 16_000_000)
        }
    }

    @Test func aClientThatHalfClosesStillGetsTheWholeResponse() throws {
        try withServer { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("GET /big?size=16000000 HTTP/1.1\r\nHost: x\r\n\r\n")
            client.shutdownWrite()
            usleep(200_000)
            let response = try client.readResponse()
            #expect(response.body.count == 16_000_000)
        }
    }
}
