#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTP
import Testing
import TestSupport

@Suite struct RobustnessTests {
    /// Sends hostile bytes on a fresh connection and returns the status of the answer, if any.
    private func attack(_ port: Int, _ bytes: [UInt8], closeEarly: Bool = false) throws -> Int? {
        let client = try TestClient(port: port, timeout: 3)
        try? client.send(bytes)
        if closeEarly { return nil }
        return try? client.readResponse().status
    }

    @Test func hostileInputsLeaveTheServerWorking() throws {
        try withServer({ $0.maxHeaderBytes = 4096 }) { server, handler in
            // Bytes past ASCII that are not UTF-8 are opaque (RFC 9110 5.5); control bytes are not.
            let obsText = Array("GET / HTTP/1.1\r\nHost: x\r\nX-Name: ".utf8) + [0xFF, 0xFE, 0x80] + Array("\r\n\r\n".utf8)
            let controlByte = Array("GET / HTTP/1.1\r\nHost: x\r\nX-Name: ".utf8) + [0xFF, 0x01] + Array("\r\n\r\n".utf8)
            var nulInTarget = Array("GET /a".utf8)
            nulInTarget += [0]
            nulInTarget += Array(" HTTP/1.1\r\n\r\n".utf8)

            #expect(try attack(server.port, Array("\u{16}\u{03}\u{01}\u{02}\u{00} garbage \r\n\r\n".utf8)) == 400)
            #expect(try attack(server.port, (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7919) } + [13, 10, 13, 10]) == 400)
            #expect(try attack(server.port, obsText) == 200)
            #expect(try attack(server.port, controlByte) == 400)
            #expect(try attack(server.port, nulInTarget) == 400)
            #expect(try attack(server.port, Array(("GET / HTTP/1.1\r\nX: " + String(repeating: "h", count: 100_000) + "\r\n\r\n").utf8)) == 431)
            #expect(try attack(server.port, Array("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n".utf8)) == 400)
            #expect(try attack(server.port, Array("POST / HTTP/1.1\r\nContent-Length: 18446744073709551616\r\n\r\n".utf8)) == 400)
            #expect(try attack(server.port, Array("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n".utf8)) == 400)
            #expect(try attack(server.port, Array("GET / HTTP/1.1\nHost: x\n\n".utf8)) == 400)
            #expect(try attack(server.port, Array("GET / HTTP/9.9\r\n\r\n".utf8)) == 505)
            #expect(try attack(server.port, Array("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".utf8)) == 400)
            #expect(try attack(server.port, Array("\r\n\r\n\r\n".utf8), closeEarly: true) == nil)

            // Truncated requests and disconnects mid-head, mid-body and mid-handler.
            _ = try attack(server.port, Array("GET /ech".utf8), closeEarly: true)
            _ = try attack(server.port, Array("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nhalf".utf8), closeEarly: true)
            _ = try attack(server.port, Array("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n10\r\nabc".utf8), closeEarly: true)
            _ = try attack(server.port, Array("GET /slow?ms=100 HTTP/1.1\r\nHost: x\r\n\r\n".utf8), closeEarly: true)
            _ = try attack(server.port, Array("GET /never HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8), closeEarly: true)
            _ = try attack(server.port, Array("GET /stream?count=5 HTTP/1.1\r\nHost: x\r\n\r\n".utf8), closeEarly: true)
            try resetConnection(server.port, Array("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\nabc".utf8))
            try resetConnection(server.port, Array("GET /slow?ms=50 HTTP/1.1\r\nHost: x\r\n\r\n".utf8))

            // Still answering, and nothing leaked once the late answers have come and gone.
            usleep(200_000)
            let client = try TestClient(port: server.port)
            try client.send("POST /echo?ok=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi")
            let response = try client.readResponse()
            #expect(response.status == 200)
            #expect(response.bodyText.contains("\"body\":\"hi\""))
            // Only this client and the request that is never answered (its client left) remain.
            #expect(TestHandler.eventually { server.openConnectionCount <= 2 })
            #expect(handler.requestCount.load(ordering: .relaxed) >= 4)
        }
    }

    @Test func seededFuzzNeverBreaksTheServer() throws {
        try withServer({ $0.maxHeaderBytes = 2048; $0.maxRequestLineBytes = 512 }) { server, _ in
            var random = SplitMix64(seed: 0x5EED)
            let pieces = ["GET", "POST", " ", "/", "/echo", "?a=%", "%41", "HTTP/1.1", "HTTP/1.0", "\r\n", "\n", "\r",
                          "Host: x", "Content-Length: ", "5", "-1", "Transfer-Encoding: chunked", "0", ";", ":",
                          "\u{0}", "é", "\u{7F}", "Expect: 100-continue", "Connection: close", "\r\n\r\n", "abcde"]
            for _ in 0..<150 {
                var bytes: [UInt8] = []
                for _ in 0..<Int(random.next() % 24) {
                    if random.next() % 5 == 0 {
                        bytes.append(UInt8(truncatingIfNeeded: random.next()))
                    } else {
                        bytes += Array(pieces[Int(random.next() % UInt64(pieces.count))].utf8)
                    }
                }
                let client = try TestClient(port: server.port, timeout: 0.1)
                try? client.send(bytes)
                // Mostly half-close, so an incomplete request ends at once instead of by timeout.
                if random.next() % 8 != 0 { client.shutdownWrite() }
                if let response = try? client.readResponse() {
                    #expect((100...599).contains(response.status))
                }
            }
            let client = try TestClient(port: server.port)
            try client.send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().status == 200)
        }
    }

    @Test func lateAnswerForVanishedClientIsIgnored() throws {
        try withServer { server, handler in
            do {
                let client = try TestClient(port: server.port)
                try client.send("GET /slow?ms=200 HTTP/1.1\r\nHost: x\r\n\r\n")
                #expect(TestHandler.eventually { handler.requestCount.load(ordering: .relaxed) == 1 })
            }
            #expect(TestHandler.eventually { server.openConnectionCount == 0 })
            usleep(300_000)
            let client = try TestClient(port: server.port)
            try client.send("GET /echo HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(try client.readResponse().status == 200)
        }
    }

    /// Connects, sends, then closes with SO_LINGER 0 so the server sees a reset.
    private func resetConnection(_ port: Int, _ bytes: [UInt8]) throws {
        let client = try TestClient(port: port)
        try client.send(bytes)
        usleep(20_000)
        var abort = linger(l_onoff: 1, l_linger: 0)
        setsockopt(client.fd, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size))
    }
}
