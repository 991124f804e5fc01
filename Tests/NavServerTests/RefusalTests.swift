import Foundation
@testable import NavServer
import NavigationCore
import Testing
import TestSupport

/// What the HTTP layer refuses on its own (a head too large or too slow, a body too large or
/// malformed, a connection over the limit) is answered as navd answers every failure: the API's
/// error body, `X-Request-ID`, the CORS headers when the head was read, a log line and a count in
/// /metrics. Over loopback, against a real server.
@Suite struct RefusalTests {
    static let origin = "http://localhost:3000"

    struct Case {
        let name: String
        let bytes: [UInt8]
        /// Sent after the bytes, once the first part has surely been read.
        var pause: Duration = .zero
        let status: Int
        let code: String
        /// The head was read whole: CORS, the client's request id, method, path and route apply.
        let headRead: Bool
        var route = "unknown"
        var method = "unknown"
    }

    @Test func everyRefusalIsWrittenLoggedAndCountedAsTheAPIsOwnErrors() async throws {
        let log = LogCapture()
        let server = try await TestServer(log: log) {
            $0.cors.origins = .only([Self.origin])
            $0.headerTimeout = .milliseconds(400)
        }
        let (id, token) = try await server.session("counter")
        let auth = "Authorization: Bearer \(token)\r\n"
        let common = "Host: x\r\nOrigin: \(Self.origin)\r\n"
        let cases = [
            Case(name: "414", bytes: Array("GET /\(String(repeating: "a", count: 9000)) HTTP/1.1\r\n\(common)X-Request-ID: r414\r\n\r\n".utf8),
                 status: 414, code: "uri_too_long", headRead: false),
            Case(name: "431", bytes: Array("GET /healthz HTTP/1.1\r\n\(common)X-Request-ID: r431\r\nX-Big: \(String(repeating: "b", count: 17000))\r\n\r\n".utf8),
                 status: 431, code: "headers_too_large", headRead: false),
            Case(name: "408", bytes: Array("GET /healthz HTTP/1.1\r\n\(common)X-Request-ID: r408\r\n".utf8),
                 pause: .milliseconds(900), status: 408, code: "request_timeout", headRead: false),
            Case(name: "413", bytes: Array("POST /sessions/\(id)/actions HTTP/1.1\r\n\(common)\(auth)X-Request-ID: r413\r\nContent-Type: application/json\r\nContent-Length: 2000000\r\n\r\n".utf8),
                 status: 413, code: "payload_too_large", headRead: true, route: "actions", method: "POST"),
            Case(name: "400", bytes: Array("POST /sessions/\(id)/actions HTTP/1.1\r\n\(common)\(auth)X-Request-ID: r400\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n".utf8),
                 status: 400, code: "bad_request", headRead: true, route: "actions", method: "POST"),
        ]
        for test in cases {
            let client = try server.client()
            try await client.send(test.bytes)
            if test.pause > .zero { try await Task.sleep(for: test.pause) }
            let response = try await client.readResponse()
            #expect(response.status == test.status, "\(test.name)")
            #expect(response.json["error"]?["code"] == .string(test.code), "\(test.name): \(response.text)")
            #expect(response.json["error"]?["message"]?.stringValue?.isEmpty == false, "\(test.name)")
            #expect(response.header("Content-Type") == "application/json; charset=utf-8", "\(test.name)")
            #expect(response.header("Connection") == "close", "\(test.name)")
            #expect(response.header("Vary") == "Origin", "\(test.name)")
            let requestID = try #require(response.header("X-Request-ID"), "\(test.name)")
            if test.headRead {
                #expect(response.header("Access-Control-Allow-Origin") == Self.origin, "\(test.name)")
                #expect(response.header("Access-Control-Expose-Headers")?.contains("X-Request-ID") == true, "\(test.name)")
                #expect(requestID == "r\(test.name)")
            } else {
                // The head was never read: no origin to grant, and a request id navd made.
                #expect(response.header("Access-Control-Allow-Origin") == nil, "\(test.name)")
                #expect(RequestLogTests.isGeneratedID(requestID), "\(test.name): \(requestID)")
            }
            #expect(await client.readUntilClosed(), "\(test.name)")

            let line = try await log.request(requestID)
            #expect(line["status"] == .int(test.status), "\(test.name)")
            #expect(line["level"] == (test.status >= 500 ? "warn" : "info"), "\(test.name): a refusal the client caused is no error of navd's")
            #expect(line["remote"]?.stringValue?.hasPrefix("127.0.0.1:") == true, "\(test.name)")
            if test.headRead {
                #expect(line["method"] == .string(test.method), "\(test.name)")
                #expect(line["path"] == .string("/sessions/\(id)/actions"), "\(test.name)")
            } else {
                #expect(line["method"] == nil && line["path"] == nil, "\(test.name): \(line)")
            }
        }
        let metrics = try await server.client().request("GET", "/metrics").text
        for test in cases {
            let sample = #"navd_http_requests_total{route="\#(test.route)",method="\#(test.method)",code="\#(test.status)"} 1"#
            #expect(metrics.contains(sample + "\n"), "missing: \(sample)")
            // Counted, not timed: a refusal takes no work.
            let timed = #"navd_http_request_duration_seconds_count{route="\#(test.route)",method="\#(test.method)",code="\#(test.status)"}"#
            #expect(!metrics.contains(timed), "\(timed)")
        }
        await server.stop()
    }

    /// Past `--max-input-buffer`, the body whose bytes took the bodies being received past it
    /// is answered with the API's own 503 at once, its connection closed after the drain. (That
    /// the body within the bound is then served is the HTTP layer's test: here the clients run
    /// on the test pool, which a busy machine can pause for longer than the half second a
    /// sender may stall while the server is pressed.)
    @Test func aBodyPastTheInputBufferIsAnsweredAsTheAPIsOwn503() async throws {
        let server = try await TestServer { $0.maxInputBuffer = 1 << 20 }
        let body = Array("{\"feature\":\"counter\"}".utf8) + Array(repeating: UInt8(ascii: " "), count: 700_000)
        let request = LoopbackClient.format("POST", "/sessions", headers: [("Content-Type", "application/json")], body: body)
        let partial = Array(request[..<(request.count - 100_000)])
        let first = try server.client()
        try await first.send(partial)
        #expect(await eventually { server.server.bufferedBodyBytes == partial.count - (request.count - body.count) })
        let second = try server.client()
        try await second.send(partial)
        let refused = try await second.readResponse()
        #expect(refused.status == 503)
        #expect(refused.json["error"]?["code"] == "over_capacity")
        #expect(refused.header("Retry-After") == "1")
        #expect(await second.readUntilClosed())
        withExtendedLifetime(first) {}
        await server.stop()
    }

    /// The 503 at `--max-connections` is written before any request is read, yet it is the API's
    /// error with `Retry-After`, a request id, the CORS headers every answer carries (here `*`),
    /// a log line and a count.
    @Test func overMaxConnectionsIsAnsweredAsTheAPIsOwn503() async throws {
        let log = LogCapture()
        let server = try await TestServer(log: log) {
            $0.maxConnections = 1
            $0.cors.origins = .any
        }
        let held = try server.client()
        #expect(try await held.request("GET", "/healthz").status == 200)
        let refused = try server.client()
        let response = try await refused.readResponse()
        #expect(response.status == 503)
        #expect(response.json["error"]?["code"] == "over_capacity")
        #expect(response.header("Retry-After") == "1")
        #expect(response.header("Access-Control-Allow-Origin") == "*")
        #expect(response.header("Connection") == "close")
        let requestID = try #require(response.header("X-Request-ID"))
        #expect(RequestLogTests.isGeneratedID(requestID))
        #expect(await refused.readUntilClosed())
        let line = try await log.request(requestID)
        #expect(line["status"] == 503 && line["level"] == "warn")

        // A client over the limit that sends a whole request (a 4 MiB body, more than the socket
        // buffers hold) after the 503 was written: its request is read and dropped, so it sends
        // it whole and then reads the 503, rather than failing with a reset mid-body.
        let connected = ContinuousClock.now
        let uploader = try server.client()
        try await Task.sleep(for: .milliseconds(100))
        do {
            try await uploader.send(LoopbackClient.format("POST", "/sessions", headers: [("Content-Type", "application/json")],
                                                          body: Array(repeating: UInt8(ascii: " "), count: 4 << 20)))
            let late = try await uploader.readResponse()
            #expect(late.status == 503 && late.json["error"]?["code"] == "over_capacity")
            #expect(await uploader.readUntilClosed())
        } catch {
            // The drain lasts 2 s from the 503 (the HTTP layer's `lingerTimeout`): only a machine
            // too busy to send 4 MiB in that time may see the close it then makes. Sooner, it is
            // the reset mid-body this test is for.
            #expect(ContinuousClock.now - connected >= .seconds(2), "cut off mid-body, before the drain's end: \(error)")
        }

        let metrics = try await held.request("GET", "/metrics").text
        #expect(metrics.contains(#"navd_http_requests_total{route="unknown",method="unknown",code="503"} 2"# + "\n"))
        await server.stop()
    }

    @Test func theErrorBodyIsEscapedJSON() {
        let response = APIError(400, "bad_request", "a \"quote\" \\ and\nline\u{01}é").response
        #expect(String(decoding: response.body, as: UTF8.self)
            == #"{"error":{"code":"bad_request","message":"a \"quote\" \\ and\nline\u0001é"}}"#)
        #expect(response.headers["Content-Type"] == "application/json; charset=utf-8")
        #expect(response.status == 400)
    }
}
