import NavigationCore
@testable import NavServer
import Testing
import TestSupport

/// `--cors-origin` and `--cors-headers`: values normalized to what browsers send, or refused;
/// answers that name the page's origin only when it is allowed.
@Suite struct CORSTests {
    @Test func originsAreNormalizedToTheFormBrowsersSend() throws {
        for (given, expected) in [
            ("http://localhost:3000/", "http://localhost:3000"),
            ("HTTPS://App.Example.COM", "https://app.example.com"),
            ("https://app.example:443", "https://app.example"),
            ("http://app.example:80/", "http://app.example"),
            ("http://app.example:8080", "http://app.example:8080"),
            ("https://app.example:0443", "https://app.example"),
            ("http://127.0.0.1:5173", "http://127.0.0.1:5173"),
            ("http://[::1]:8080/", "http://[::1]:8080"),
            ("http://[2001:DB8::1]", "http://[2001:db8::1]"),
        ] {
            #expect(try CORSPolicy.normalizedOrigin(given) == expected, "\(given)")
        }
        #expect(try CORSPolicy.parseOrigins(" https://a.example , http://localhost:3000/,https://a.example") ==
                .only(["https://a.example", "http://localhost:3000"]))
        #expect(try CORSPolicy.parseOrigins("*") == .any)
    }

    @Test func whatIsNotAnOriginIsRefusedWithAReason() throws {
        for (given, reason) in [
            ("https://app.example/path", "path"),
            ("https://app.example/?x=1", "query"),
            ("https://app.example#top", "fragment"),
            ("https://user:pw@app.example", "user info"),
            ("ftp://app.example", "http or https"),
            ("app.example", "not an origin"),
            ("https://", "no valid host"),
            ("https://app..example", "no valid host"),
            ("https://app.example:", "port"),
            ("https://app.example:70000", "port"),
            ("https://app.example:0", "port"),
            ("https://[::1", "IPv6"),
            ("https://[nonsense]", "IPv6"),
            ("https://ex ample.com", "spaces"),
            ("https://bücher.example", "punycode"),
            ("null", "sandboxed"),
            ("", "empty"),
        ] {
            #expect(Self.refusal { try CORSPolicy.normalizedOrigin(given) }?.contains(reason) == true, "\(given)")
        }
        #expect(Self.refusal { try CORSPolicy.parseOrigins("*, https://app.example") }?.contains("*") == true)
        #expect(Self.refusal { try CORSPolicy.parseOrigins("https://app.example,") }?.contains("empty") == true)
    }

    @Test func headersAreTokensAndTheAPIsOwnAreNotRepeated() throws {
        #expect(try CORSPolicy.parseHeaders("traceparent, tracestate,X-Request-ID") == ["traceparent", "tracestate"])
        #expect(try CORSPolicy.parseHeaders("authorization, traceparent, TraceParent") == ["traceparent"])
        for bad in ["trace parent", "x:y", "", "a,,b", "*", "é"] {
            #expect(Self.refusal { try CORSPolicy.parseHeaders(bad) } != nil, "\(bad)")
        }
        #expect(throws: ServerConfiguration.Invalid.self) {
            try ServerConfiguration.parse(arguments: ["--cors-headers", "traceparent"], environment: [:])
        }
    }

    /// The reason a parse gave, or nil if it accepted the value.
    private static func refusal<T>(_ parse: () throws -> T) -> String? {
        do {
            _ = try parse()
            return nil
        } catch {
            return (error as? CORSPolicy.Refusal)?.description ?? "\(error)"
        }
    }

    /// Settings as an operator types them, through to what a browser receives.
    @Test func allowedOriginsAreEchoedWithVaryAndOthersGetNoGrant() async throws {
        let parsed = try ServerConfiguration.parse(
            arguments: ["--cors-origin", "http://localhost:3000/, HTTPS://App.Example", "--cors-headers", "traceparent"],
            environment: [:])
        let server = try await TestServer { $0.cors = parsed.cors }
        let (id, token) = try await server.session("counter")
        let client = try server.client()

        for origin in ["http://localhost:3000", "https://app.example"] {
            let answer = try await client.request("GET", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)"), ("Origin", origin)])
            #expect(answer.status == 200)
            #expect(answer.header("access-control-allow-origin") == origin)
            #expect(answer.header("access-control-expose-headers") == "Location, ETag, X-Request-ID")
            #expect(answer.header("vary") == "Origin")
        }
        for origin in ["http://localhost:3000/", "https://evil.example", "http://localhost:3001", nil] as [String?] {
            var headers = [("Authorization", "Bearer \(token)")]
            if let origin { headers.append(("Origin", origin)) }
            let answer = try await client.request("GET", "/sessions/\(id)", headers: headers)
            #expect(answer.status == 200)
            #expect(answer.header("access-control-allow-origin") == nil, "\(origin ?? "no origin")")
            #expect(answer.header("vary") == "Origin")
        }

        // Two origins, even allowed ones: which page asks is unknown, and none is granted.
        let two = try await client.request("GET", "/sessions/\(id)", headers: [
            ("Authorization", "Bearer \(token)"), ("Origin", "https://app.example"), ("Origin", "http://localhost:3000"),
        ])
        #expect(two.status == 200)
        #expect(two.header("access-control-allow-origin") == nil)
        #expect(two.header("vary") == "Origin")
        let twoPreflight = try await client.request("OPTIONS", "/sessions/\(id)/actions", headers: [
            ("Origin", "https://app.example"), ("Origin", "https://app.example"), ("Access-Control-Request-Method", "POST"),
        ])
        #expect(twoPreflight.header("access-control-allow-origin") == nil)
        #expect(twoPreflight.header("access-control-allow-methods") == nil)

        let preflight = try await client.request("OPTIONS", "/sessions/\(id)/actions", headers: [
            ("Origin", "http://localhost:3000"), ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "authorization, content-type, traceparent"),
        ])
        #expect(preflight.status == 204)
        #expect(preflight.header("access-control-allow-origin") == "http://localhost:3000")
        #expect(preflight.header("access-control-allow-headers") == "Authorization, Content-Type, If-Match, Last-Event-ID, X-Request-ID, traceparent")
        #expect(preflight.header("access-control-allow-methods") == "POST, OPTIONS")
        let refused = try await client.request("OPTIONS", "/sessions/\(id)/actions", headers: [
            ("Origin", "https://evil.example"), ("Access-Control-Request-Method", "POST"),
        ])
        #expect(refused.status == 204)
        #expect(refused.header("access-control-allow-origin") == nil)
        #expect(refused.header("access-control-allow-methods") == nil)
        #expect(refused.header("access-control-allow-headers") == nil)

        let stream = try server.client()
        try await stream.send(LoopbackClient.format("GET", "/sessions/\(id)/events?token=\(token)", headers: [("Origin", "https://app.example")]))
        let head = try await stream.readResponse(head: true)
        #expect(head.status == 200)
        #expect(head.header("access-control-allow-origin") == "https://app.example")
        #expect(head.header("vary") == "Origin")
        await server.stop()
    }

    @Test func anyOriginIsAStarWithoutVary() async throws {
        let server = try await TestServer { $0.cors.origins = .any }
        let answer = try await server.client().request("GET", "/features", headers: [("Origin", "https://anyone.example")])
        #expect(answer.header("access-control-allow-origin") == "*")
        #expect(answer.header("vary") == nil)
        let preflight = try await server.client().request("OPTIONS", "/sessions", headers: [("Origin", "https://anyone.example")])
        #expect(preflight.header("access-control-allow-origin") == "*")
        #expect(preflight.header("access-control-allow-headers") == "Authorization, Content-Type, If-Match, Last-Event-ID, X-Request-ID")
        await server.stop()
    }
}
