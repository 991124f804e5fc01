import HTTP
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
            }
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
}
