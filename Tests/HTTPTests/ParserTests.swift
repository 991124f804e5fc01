@testable import HTTP
import Testing
import TestSupport

@Suite struct ParserTests {
    private func parse(_ text: String, maxBody: Int = 1 << 20) -> Result<RequestHead, ProtocolError> {
        let bytes = Array(text.utf8)
        return bytes.withUnsafeBytes { raw in
            var scanner = HeadScanner()
            guard case .complete(let length, let lineLength) = scanner.scan(raw, maxRequestLine: 8192, maxHeaderBytes: 16384) else {
                return .failure(.badRequest("incomplete"))
            }
            return RequestHeadParser.parse(
                UnsafeRawBufferPointer(rebasing: raw[0..<length]), requestLineLength: lineLength, maxBodyBytes: maxBody)
        }
    }

    @Test func parsesRequestLineTargetAndHeaders() throws {
        let head = try parse("GET /a%20b/c?x=1&y=hello+world&z=%C3%A9&flag HTTP/1.1\r\nHost: h\r\nX-A:  v1 \r\nx-a: v2\r\n\r\n").get()
        #expect(head.request.method == "GET")
        #expect(head.request.target == "/a%20b/c?x=1&y=hello+world&z=%C3%A9&flag")
        #expect(head.request.path == "/a b/c")
        #expect(head.request.queryValue("y") == "hello world")
        #expect(head.request.queryValue("z") == "é")
        #expect(head.request.queryValue("flag") == "")
        #expect(head.request.query.count == 4)
        #expect(head.request.headers["x-a"] == "v1")
        #expect(head.request.headers.values("X-A") == ["v1", "v2"])
        #expect(head.request.version == "HTTP/1.1")
        #expect(head.keepAlive)
        #expect(head.framing == .none)
    }

    @Test func absoluteFormAndAsterisk() throws {
        #expect(try parse("GET http://example.com:80/p?q=1 HTTP/1.1\r\nHost: x\r\n\r\n").get().request.path == "/p")
        #expect(try parse("GET http://example.com HTTP/1.1\r\nHost: x\r\n\r\n").get().request.path == "/")
        #expect(try parse("GET HTTPS://example.com/p HTTP/1.1\r\nHost: x\r\n\r\n").get().request.path == "/p")
        #expect(try parse("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n").get().request.path == "*")
    }

    /// Absolute-form names a resource of this server only with its own schemes.
    @Test(arguments: ["ftp://example.com/p", "httpx://example.com/p", "file:///p", "http:/p", "https:p", "h://x/p"])
    func absoluteFormOfAnotherSchemeIsRefused(_ target: String) {
        guard case .failure(let error) = parse("GET \(target) HTTP/1.1\r\nHost: x\r\n\r\n") else {
            Issue.record("served \(target)")
            return
        }
        #expect(error.status == 400)
    }

    @Test func framingAndConnectionOptions() throws {
        #expect(try parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n\r\n").get().framing == .length(12))
        #expect(try parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\nContent-Length: 5\r\n\r\n").get().framing == .length(5))
        #expect(try parse("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n").get().framing == .chunked)
        #expect(try parse("GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Close\r\n\r\n").get().keepAlive == false)
        #expect(try parse("GET / HTTP/1.0\r\n\r\n").get().keepAlive == false)
        #expect(try parse("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").get().keepAlive)
        #expect(try parse("PUT / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n").get().expectsContinue)
    }

    @Test(arguments: [
        "GET  / HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.1 \r\n\r\n",
        "G(T / HTTP/1.1\r\n\r\n",
        "GET /\u{7F} HTTP/1.1\r\n\r\n",
        "GET noslash HTTP/1.1\r\n\r\n",
        "GET /%zz HTTP/1.1\r\n\r\n",
        "GET /%FF HTTP/1.1\r\n\r\n",
        "GET /a#fragment HTTP/1.1\r\n\r\n",
        "GET /a?b=c#d HTTP/1.1\r\n\r\n",
        "GET / HTTP/1.x\r\n\r\n",
        "GET / HTTP/1.1\r\nNo Colon\r\n\r\n",
        "GET / HTTP/1.1\r\nBad Name: v\r\n\r\n",
        "GET / HTTP/1.1\r\n: v\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\r\nA: b\u{01}c\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 99999999999999999999999\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n",
        "POST / HTTP/1.1\r\nContent-Length: \r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n",
        "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n",
        "GET / HTTP/1.1\r\nX: a\r\r\n\r\n",
        "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",
        "GET / HTTP/1.1\r\nX\r: a\r\n\r\n",
        "GET /\r HTTP/1.1\r\n\r\n",
    ])
    func rejectsMalformedHeads(_ text: String) {
        guard case .failure(let error) = parse(text) else {
            Issue.record("accepted \(text.debugDescription)")
            return
        }
        #expect(error.status == 400, "\(text.debugDescription) gave \(error)")
    }

    /// Random heads, fed in random fragments through the scanner and the parser: nothing may
    /// trap, and whatever is accepted must be well-formed.
    @Test func randomHeadsNeverTrap() {
        var random = SplitMix64(seed: 42)
        let pieces = ["GET", "POST", " ", "/", "?", "&", "=", "%", "%4", "%41", "+", "HTTP/1.1", "HTTP/1.0", "\r", "\n",
                      "\r\n", "\r\n\r\n", ":", "Host", "Content-Length", "Transfer-Encoding", "chunked", "Expect",
                      "100-continue", "Connection", "close", ",", "5", "-", "\t", "\u{0}", "é", "\u{7F}", "x"]
        func randomPieces(_ count: UInt64) -> [UInt8] {
            var bytes: [UInt8] = []
            for _ in 0..<Int(random.next() % count) {
                if random.next() % 6 == 0 {
                    bytes.append(UInt8(truncatingIfNeeded: random.next()))
                } else {
                    bytes += Array(pieces[Int(random.next() % UInt64(pieces.count))].utf8)
                }
            }
            return bytes
        }
        for _ in 0..<20_000 {
            // Mostly head-shaped: a request line, some field lines, an empty line.
            var bytes: [UInt8] = random.next() % 2 == 0 ? Array("GET /a?b=c HTTP/1.1".utf8) : randomPieces(8)
            bytes += [13, 10]
            for _ in 0..<Int(random.next() % 4) {
                bytes += random.next() % 3 == 0 ? Array("X: ".utf8) + randomPieces(6) : randomPieces(8)
                bytes += [13, 10]
            }
            bytes += random.next() % 8 == 0 ? randomPieces(4) : [13, 10]
            var scanner = HeadScanner()
            var end = 0
            while end < bytes.count {
                end = min(bytes.count, end + 1 + Int(random.next() % 16))
                let outcome = bytes[0..<end].withUnsafeBytes { scanner.scan($0, maxRequestLine: 64, maxHeaderBytes: 256) }
                guard case .complete(let length, let lineLength) = outcome else {
                    if case .failure = outcome { break }
                    continue
                }
                let parsed = bytes[0..<length].withUnsafeBytes {
                    RequestHeadParser.parse($0, requestLineLength: lineLength, maxBodyBytes: 100)
                }
                if case .success(let head) = parsed {
                    #expect(head.request.method.utf8.allSatisfy(ASCII.isTokenCharacter))
                    #expect(!head.request.path.isEmpty)
                }
                break
            }
        }
    }

    @Test func randomChunkedBodiesNeverTrap() {
        var random = SplitMix64(seed: 7)
        let pieces = ["0", "1", "5", "a", "F", "ffffffffffffffff", "\r\n", "\r", "\n", ";x=y", " ", "abcde", "\r\n\r\n", "T: v"]
        for _ in 0..<20_000 {
            var bytes: [UInt8] = []
            for _ in 0..<Int(random.next() % 30) {
                if random.next() % 8 == 0 {
                    bytes.append(UInt8(truncatingIfNeeded: random.next()))
                } else {
                    bytes += Array(pieces[Int(random.next() % UInt64(pieces.count))].utf8)
                }
            }
            var decoder = ChunkedBodyDecoder()
            var body: [UInt8] = []
            var start = 0
            decoding: while start < bytes.count {
                let end = min(bytes.count, start + 1 + Int(random.next() % 8))
                let outcome = bytes[start..<end].withUnsafeBytes {
                    decoder.decode($0, into: &body, maxBodyBytes: 64, maxTrailerBytes: 32)
                }
                switch outcome {
                case .needsMore: start = end
                case .finished(let consumed):
                    #expect(consumed <= end - start)
                    break decoding
                case .failure: break decoding
                }
                #expect(body.count <= 64)
            }
        }
    }

    /// RFC 9110 5.5: bytes past ASCII that are not UTF-8 (obs-text) are opaque, not an error;
    /// they read as ISO-8859-1. UTF-8 reads as UTF-8; control characters are still refused.
    @Test func obsTextInHeaderValueIsOpaque() throws {
        func value(_ bytes: [UInt8]) throws -> String? {
            let head = Array("GET / HTTP/1.1\r\nHost: h\r\nX: a".utf8) + bytes + Array("\r\n\r\n".utf8)
            return try head.withUnsafeBytes { raw in
                try RequestHeadParser.parse(raw, requestLineLength: 16, maxBodyBytes: 10).get().request.headers["x"]
            }
        }
        #expect(try value([0xC3, 0x28]) == "a\u{C3}(")
        #expect(try value([0xE9, 0xFF]) == "a\u{E9}\u{FF}")
        #expect(try value(Array("é".utf8)) == "aé")
        #expect(throws: ProtocolError.self) { try value([0xE9, 0x01]) }
    }

    /// RFC 9112 3.2: an HTTP/1.1 request names its host once; HTTP/1.0 may leave it out.
    @Test func hostIsRequiredOnceInHTTP11() {
        #expect(throws: ProtocolError.badRequest("An HTTP/1.1 request must carry a Host header field.")) {
            try parse("GET / HTTP/1.1\r\nX: y\r\n\r\n").get()
        }
        #expect(throws: ProtocolError.badRequest("More than one Host header field.")) {
            try parse("GET / HTTP/1.1\r\nHost: a\r\nhost: b\r\n\r\n").get()
        }
        #expect(throws: ProtocolError.badRequest("More than one Host header field.")) {
            try parse("GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n").get()
        }
        #expect(throws: Never.self) { try parse("GET / HTTP/1.0\r\n\r\n").get() }
        #expect(throws: Never.self) { try parse("GET / HTTP/1.1\r\nHOST: a\r\n\r\n").get() }
    }

    /// RFC 9112 3.2: a Host that is not `host[:port]` is refused too.
    @Test func hostMustBeAHostAndPort() {
        for host in ["example.com", "example.com:8080", "127.0.0.1:80", "[::1]:8080", "[v1.fe80::a+en1]", "a%2Db", "x:", ""] {
            #expect(throws: Never.self, "\(host)") { try parse("GET / HTTP/1.1\r\nHost: \(host)\r\n\r\n").get() }
        }
        for host in ["a b", "a/b", "user@host", "host:80x", "host:80:90", "[::1", "[]", "[::1]x", "a%2", "a%zz", "é"] {
            #expect(throws: ProtocolError.badRequest("The Host header field is not a host and port."), "\(host)") {
                try parse("GET / HTTP/1.1\r\nHost: \(host)\r\n\r\n").get()
            }
        }
    }

    @Test func statusChoicesForSpecialFailures() {
        #expect(throws: ProtocolError.versionNotSupported) { try parse("GET / HTTP/2.0\r\n\r\n").get() }
        #expect(throws: ProtocolError.payloadTooLarge) {
            try parse("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\n", maxBody: 10).get()
        }
        #expect(throws: ProtocolError.notImplemented("Only the chunked transfer coding is supported.")) {
            try parse("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n").get()
        }
    }

    @Test func scannerRejectsBareLineFeedsAndEnforcesLimits() {
        func scan(_ text: String, line: Int = 100, headers: Int = 100) -> HeadScanner.Outcome {
            var scanner = HeadScanner()
            return Array(text.utf8).withUnsafeBytes { scanner.scan($0, maxRequestLine: line, maxHeaderBytes: headers) }
        }
        guard case .failure(let bareLF) = scan("GET / HTTP/1.1\nHost: x\n\n") else { Issue.record("bare LF accepted"); return }
        #expect(bareLF.status == 400)
        guard case .failure(let long) = scan(String(repeating: "a", count: 120)) else { Issue.record("long line"); return }
        #expect(long.status == 414)
        guard case .failure(let big) = scan("GET / HTTP/1.1\r\n" + String(repeating: "A: b\r\n", count: 30)) else {
            Issue.record("large headers accepted")
            return
        }
        #expect(big.status == 431)
        guard case .incomplete = scan("GET / HTTP/1.1\r\nHost: x\r\n\r") else { Issue.record("not incomplete"); return }
    }

    @Test func scannerResumesAcrossFragments() {
        let text = Array("GET / HTTP/1.1\r\nHost: x\r\n\r\nrest".utf8)
        var scanner = HeadScanner()
        var result: HeadScanner.Outcome = .incomplete
        for end in 1...text.count {
            result = text[0..<end].withUnsafeBytes { scanner.scan($0, maxRequestLine: 100, maxHeaderBytes: 100) }
            if case .complete = result { break }
        }
        guard case .complete(let length, let lineLength) = result else { Issue.record("never completed"); return }
        #expect(length == text.count - 4)
        #expect(lineLength == 16)
    }

    @Test func chunkedDecoderHandlesExtensionsTrailersAndSplits() {
        let wire = Array("4;name=value\r\nWiki\r\n5 ; x\r\npedia\r\n0\r\nTrailer: t\r\n\r\nNEXT".utf8)
        for split in 0...wire.count {
            var decoder = ChunkedBodyDecoder()
            var body: [UInt8] = []
            var consumed = 0
            var finished = false
            for part in [wire[0..<split], wire[split...]] where !finished {
                let outcome = part.withUnsafeBytes { decoder.decode($0, into: &body, maxBodyBytes: 100, maxTrailerBytes: 100) }
                switch outcome {
                case .needsMore: consumed += part.count
                case .finished(let used):
                    consumed += used
                    finished = true
                case .failure(let error): Issue.record("failed at split \(split): \(error)")
                }
            }
            #expect(finished)
            #expect(String(decoding: body, as: UTF8.self) == "Wikipedia")
            #expect(consumed == wire.count - 4)
        }
    }

    @Test func chunkedDecoderRejectsBadInputAndOversize() {
        func decode(_ text: String, max: Int = 100) -> ChunkedBodyDecoder.Outcome {
            var decoder = ChunkedBodyDecoder()
            var body: [UInt8] = []
            return Array(text.utf8).withUnsafeBytes { decoder.decode($0, into: &body, maxBodyBytes: max, maxTrailerBytes: 100) }
        }
        for bad in ["x\r\n", "\r\n", "4\nWiki", "4\r\nWikiX", "ffffffffffffffffffff\r\n", "-1\r\n", "4 junk\r\nWiki\r\n"] {
            guard case .failure = decode(bad) else { Issue.record("accepted \(bad.debugDescription)"); continue }
        }
        for good in ["4 \r\nWiki\r\n0\r\n\r\n", "4 ;name=value\r\nWiki\r\n0\r\n\r\n"] {
            guard case .finished = decode(good) else { Issue.record("refused \(good.debugDescription)"); continue }
        }
        guard case .failure(let error) = decode("8\r\n12345678\r\n8\r\n", max: 10) else { Issue.record("too large"); return }
        #expect(error.status == 413)
    }

    /// The framing is bounded in bytes as the data is: a size line of endless zeros, or a small
    /// body in one-byte chunks each with a long extension, is refused once its framing alone
    /// passes what the body may take (here the 4 KiB floor, the body limit being 100).
    @Test func chunkedFramingIsBoundedInBytes() {
        func decode(_ text: String) -> ChunkedBodyDecoder.Outcome {
            var decoder = ChunkedBodyDecoder()
            var body: [UInt8] = []
            return Array(text.utf8).withUnsafeBytes { decoder.decode($0, into: &body, maxBodyBytes: 100, maxTrailerBytes: 100) }
        }
        let zeros = String(repeating: "0", count: 5000) + "4\r\nWiki\r\n0\r\n\r\n"
        guard case .failure(let endless) = decode(zeros) else { Issue.record("a size line of 5,000 zeros was taken"); return }
        #expect(endless.status == 413)
        let longExtensions = String(repeating: "1;" + String(repeating: "e", count: 1000) + "\r\nx\r\n", count: 5) + "0\r\n\r\n"
        guard case .failure(let extended) = decode(longExtensions) else { Issue.record("5 KB of framing for 5 bytes was taken"); return }
        #expect(extended.status == 413)
        // Ordinary framing of the same data is fine.
        guard case .finished = decode("000004;a=b\r\nWiki\r\n1\r\nx\r\n0\r\n\r\n") else { Issue.record("refused"); return }
    }

    @Test func headersAreOrderedAndCaseInsensitive() {
        var headers: HTTPHeaders = ["A": "1", "b": "2"]
        headers.add("a", "3")
        #expect(headers["a"] == "1")
        #expect(headers.values("A") == ["1", "3"])
        headers.set("A", "4")
        #expect(headers.values("a") == ["4"])
        #expect(headers.map(\.name) == ["A", "b"])
        headers.remove("B")
        #expect(headers.count == 1)
        #expect(HTTPHeaders([("X", "y")])["x"] == "y")
    }

    @Test func publicRequestInitDecodesTarget() {
        let request = HTTPRequest(method: "GET", target: "/s%2Fx?a=b+c")
        #expect(request.path == "/s/x")
        #expect(request.queryValue("a") == "b c")
    }

    /// What a router splits: the path as sent, whatever the target's form.
    @Test func encodedPathIsThePathAsSent() {
        let cases = [("/s%2Fx?a=b", "/s%2Fx"), ("/a/b", "/a/b"), ("/?x", "/"), ("http://host:80/a%2Fb?x=1", "/a%2Fb"),
                     ("http://host", "/"), ("http://host?x=1", "/"), ("*", "*")]
        for (target, path) in cases {
            #expect(HTTPRequest(method: "GET", target: target).encodedPath == path, "\(target)")
        }
    }
}
