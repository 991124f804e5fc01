@testable import HTTP
import Testing

@Suite struct KeepAliveTests {
    @Test func threeRequestsOnOneConnection() throws {
        try withServer { server, _ in
            let client = try TestClient(port: server.port)
            for index in 0..<3 {
                try client.send("GET /echo?n=\(index) HTTP/1.1\r\nHost: x\r\n\r\n")
                let response = try client.readResponse()
                #expect(response.status == 200)
                #expect(response.bodyText.contains("\"n=\(index)\""))
                #expect(response.headers["Connection"] == nil)
                #expect(response.headers["X-Test"] == "yes")
                #expect(response.headers["Content-Type"] == "application/json; charset=utf-8")
                // RFC 9110 §6.6.1: a server with a clock sends the date, as an IMF-fixdate.
                let date = try #require(response.headers["Date"])
                #expect(date.hasSuffix(" GMT") && date.count == 29, "\(date)")
            }
        }
    }

    /// IMF-fixdate (RFC 9110 §5.6.7), checked against the RFC's own example and dates whose
    /// day or month is easy to get wrong.
    @Test func datesAreIMFFixdates() {
        #expect(HTTPDate.format(784_111_777) == "Sun, 06 Nov 1994 08:49:37 GMT")
        #expect(HTTPDate.format(0) == "Thu, 01 Jan 1970 00:00:00 GMT")
        #expect(HTTPDate.format(951_782_400) == "Tue, 29 Feb 2000 00:00:00 GMT")
        #expect(HTTPDate.format(1_798_761_599) == "Thu, 31 Dec 2026 23:59:59 GMT")
    }

    @Test func aRequestTheHandlerDropsIsAnswered500AndThePipelineGoesOn() throws {
        try withServer { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("GET /never HTTP/1.1\r\nHost: x\r\n\r\nGET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            let dropped = try client.readResponse()
            #expect(dropped.status == 500)
            #expect(dropped.headers["X-Refused"] == "internalError")
            #expect(dropped.bodyText.contains(#""path":"/never""#))
            #expect(try client.readResponse().status == 200)
        }
    }

    /// A few empty lines before a request are skipped (RFC 9112 §2.2); endless ones are not read
    /// for as long as the head timeout lasts, but refused once past a small bound.
    @Test func emptyLinesBeforeARequestAreSkippedUpToABound() throws {
        try withServer { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("\r\n\r\nGET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().status == 200)
            try client.send(String(repeating: "\r\n", count: 40))
            try client.send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            let refused = try client.readResponse()
            #expect(refused.status == 400)
            #expect(refused.bodyText.contains("empty lines"))
            #expect(client.waitForClose())
        }
    }

    @Test func connectionCloseIsHonoured() throws {
        try withServer { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("GET /echo HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.headers["Connection"] == "close")
            #expect(client.waitForClose())
        }
    }

    @Test func http10ClosesUnlessKeepAlive() throws {
        try withServer { server, _ in
            let plain = try TestClient(port: server.port)
            try plain.send("GET /echo HTTP/1.0\r\n\r\n")
            let first = try plain.readResponse()
            #expect(first.status == 200)
            #expect(first.headers["Connection"] == "close")
            #expect(plain.waitForClose())

            let kept = try TestClient(port: server.port)
            for _ in 0..<2 {
                try kept.send("GET /echo HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                let response = try kept.readResponse()
                #expect(response.status == 200)
                #expect(response.headers["Connection"] == "keep-alive")
            }
        }
    }

    @Test func pipelinedResponsesKeepRequestOrder() throws {
        try withServer { server, _ in
            let client = try TestClient(port: server.port)
            // The first answer comes last from another thread; the order must still hold.
            try client.send(
                "GET /slow?ms=300&id=1 HTTP/1.1\r\nHost: x\r\n\r\n"
                + "GET /slow?ms=10&id=2 HTTP/1.1\r\nHost: x\r\n\r\n"
                + "GET /echo?id=3 HTTP/1.1\r\nHost: x\r\n\r\n"
                + "POST /echo?id=4 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc")
            for id in 1...4 {
                let response = try client.readResponse()
                #expect(response.status == 200)
                #expect(response.bodyText.contains("\"id=\(id)\""))
            }
        }
    }

    @Test func idleConnectionIsClosedAfterIdleTimeout() throws {
        try withServer({ $0.idleTimeout = .milliseconds(300) }) { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().status == 200)
            let start = ContinuousClock.now
            #expect(client.waitForClose(timeout: 3))
            #expect(ContinuousClock.now - start < .seconds(2))
            #expect(TestHandler.eventually { server.openConnectionCount == 0 })
        }
    }

    @Test func handlerSeesRequestDetailsAndPeerAddress() throws {
        final class Inspect: HTTPHandler {
            func handle(_ request: HTTPRequest, responder: HTTPResponder) {
                let text = "\(request.version)|\(request.headers["x-one"] ?? "-")|\(request.headers.values("X-Two"))|"
                    + "\(responder.peer)"
                responder.respond(HTTPResponse(status: 200, headers: ["Content-Length": "999"], body: Array(text.utf8)))
            }
        }
        let server = HTTPServer(configuration: .init(port: 0, loopCount: 1, backend: .underTest), handler: Inspect())
        try server.start()
        defer { server.finishShutdown(deadline: .now + .seconds(1)) }
        let client = try TestClient(port: server.port)
        try client.send("GET / HTTP/1.1\r\nHost: x\r\nX-One: 1\r\nX-Two: a\r\nx-two: b\r\n\r\n")
        let response = try client.readResponse()
        // The handler's wrong Content-Length is replaced by the real one.
        #expect(response.headers.values("Content-Length") == ["\(response.body.count)"])
        let parts = response.bodyText.split(separator: "|").map(String.init)
        #expect(parts.count == 4)
        #expect(parts.prefix(3) == ["HTTP/1.1", "1", "[\"a\", \"b\"]"])
        #expect(parts.last?.hasPrefix("127.0.0.1:") == true)
    }
}
