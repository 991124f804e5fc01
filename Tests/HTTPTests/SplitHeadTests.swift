#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
@testable import HTTP
import Testing

/// A head's line ends may arrive a byte at a time, split wherever TCP splits them.
@Suite struct SplitHeadTests {
    /// The scanner sees the bytes of one head grow; split anywhere (inside the final CRLF CRLF
    /// included), it finds the same end as when it sees them at once.
    @Test func theScannerFindsTheEndOfAHeadSplitAnywhere() {
        let head = Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8)
        let body = Array("next".utf8)
        for split in 1..<head.count {
            var scanner = HeadScanner()
            let first = head[0..<split].withUnsafeBytes { scanner.scan($0, maxRequestLine: 100, maxHeaderBytes: 100) }
            guard case .incomplete = first else {
                Issue.record("split at \(split): \(first) before the head was complete")
                continue
            }
            let whole = (head + body).withUnsafeBytes { scanner.scan($0, maxRequestLine: 100, maxHeaderBytes: 100) }
            guard case .complete(let length, let lineLength) = whole else {
                Issue.record("split at \(split): \(whole)")
                continue
            }
            #expect(length == head.count && lineLength == 16, "split at \(split)")
        }
    }

    /// Over a real socket, with a pause between the writes so they arrive as separate reads.
    @Test(arguments: [
        // The final blank line split after its CR, and the last header line's CRLF split.
        ["GET /echo HTTP/1.1\r\nHost: x\r\n\r", "\n"],
        ["GET /echo HTTP/1.1\r\nHost: x\r", "\n\r\n"],
        // No header at all, which only HTTP/1.0 allows (1.1 must name its Host).
        ["GET /echo HTTP/1.0\r", "\n\r\n"],
        ["GET /echo HTTP/1.1\r\nHost: x\r\n", "\r", "\n"],
        // An empty line before the request (RFC 9112 §2.2 says to ignore it) split after its CR.
        ["\r", "\nGET /echo HTTP/1.1\r\nHost: x\r\n\r\n"],
        ["\r\n\r", "\nGET /echo HTTP/1.1\r\nHost: x\r\n\r\n"],
    ])
    func aHeadSplitInsideItsLineEndsIsServed(_ pieces: [String]) throws {
        try withServer { server, _ in
            let client = try TestClient(port: server.port)
            for piece in pieces {
                try client.send(piece)
                usleep(60_000)
            }
            let response = try client.readResponse()
            #expect(response.status == 200, "\(pieces)")
            #expect(response.bodyText.contains("\"path\":\"/echo\""))
        }
    }

    /// A client that ends a body with an extra CRLF (old browsers did) has the next request on
    /// the same connection served, even when that CRLF is split across two reads.
    @Test func anExtraCRLFAfterABodySplitAcrossReadsIsIgnored() throws {
        try withServer { server, _ in
            let client = try TestClient(port: server.port)
            try client.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi\r")
            #expect(try client.readResponse().status == 200)
            usleep(60_000)
            try client.send("\nGET /second HTTP/1.1\r\nHost: x\r\n\r\n")
            let second = try client.readResponse()
            #expect(second.status == 200)
            #expect(second.bodyText.contains("\"path\":\"/second\""))
        }
    }
}
