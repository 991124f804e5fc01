import NavigationCore
@testable import NavServer
import Testing
import TestSupport

/// `--allowed-hosts`: a request for a host name navd was not told it serves is refused (the
/// guard against DNS rebinding), while addresses, probes and the names it serves pass.
@Suite struct HostPolicyTests {
    @Test func namesAreMatchedWithoutPortCaseOrTrailingDotAndAddressesAlwaysPass() {
        let policy = HostPolicy(.only(["navd.example.com", ".apps.example"]))
        for allowed in ["navd.example.com", "NAVD.Example.COM:8443", "navd.example.com.", "navd.example.com.:80",
                        "apps.example", "a.apps.example", "b.c.apps.example:1",
                        "127.0.0.1", "10.0.0.7:8080", "[::1]:8080", "[2001:db8::1]"] {
            #expect(policy.allows(allowed[...]), "\(allowed)")
        }
        for refused in ["evil.example", "navd.example.com.evil.example", "xnavd.example.com", "evilapps.example",
                        "localhost", "127.0.0.1.evil.example", "1.2.3.4.5", "256.1.1.1", "1.2.3", "1..2.3", "0x7f.0.0.1",
                        "evil@a.apps.example", "evil%40.apps.example", "", ":80",
                        "[evil.example]", "[evil.example]:80", "[::1", "navd.example.com:x@evil.example", "1.2.3.4:1@evil.example",
                        "navd.example.com:8o", "a..apps.example:1@navd.example.com"] {
            #expect(!policy.allows(refused[...]), "\(refused)")
        }
        #expect(policy.allows(nil), "a request that names no host (HTTP/1.0) has nothing to rebind")
        #expect(HostPolicy(.any).allows("anything.example"))
        #expect(policy.description == "navd.example.com,.apps.example" && HostPolicy(.any).description == "*")
    }

    @Test func aLoopbackServerAnswersForLocalhostOnlyAndAnyOtherForEveryName() {
        for loopback in ["127.0.0.1", "127.0.0.2", "::1", "localhost", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1"] {
            let policy = HostPolicy.standard(listeningOn: loopback)
            #expect(policy.allows("localhost:8080") && policy.allows("app.localhost"), "\(loopback)")
            #expect(!policy.allows("evil.example:8080") && !policy.allows("localhost.evil.example"), "\(loopback)")
        }
        for open in ["0.0.0.0", "::", "10.1.2.3", "::ffff:10.1.2.3", "::2", "128.0.0.1"] {
            #expect(HostPolicy.standard(listeningOn: open) == HostPolicy(.any), "\(open)")
        }
        var configuration = ServerConfiguration()
        configuration.host = "0.0.0.0"
        configuration.allowedHosts = HostPolicy(.only(["navd.example.com"]))
        #expect(configuration.hostPolicy == HostPolicy(.only(["navd.example.com"])), "a setting wins over the default")
    }

    @Test func theSettingTakesNamesOrAStarAndSaysWhyItRefusesTheRest() throws {
        #expect(try HostPolicy.parse("*") == HostPolicy(.any))
        #expect(try HostPolicy.parse(" Navd.Example.com , .Apps.example.,localhost") ==
                HostPolicy(.only(["navd.example.com", ".apps.example", "localhost"])))
        for (bad, reason) in [("", "empty"), ("a,,b", "empty"), ("*, navd.example.com", "stands alone"),
                              ("navd example", "not a host name"), ("https://navd.example", "not a host name"),
                              ("navd.example:8080", "not a host name"), (".", "not a host name"),
                              ("127.0.0.1", "address"), ("bücher.example", "not a host name"),
                              ("..example.com", "not a host name"), ("a..example.com", "not a host name"), ("example..", "not a host name")] {
            #expect(Self.refusal(bad)?.contains(reason) == true, "\(bad)")
        }
        let configuration = try ServerConfiguration.parse(arguments: ["--allowed-hosts", "navd.example.com"],
                                                          environment: ["NAVD_ALLOWED_HOSTS": "other.example"])
        #expect(configuration.hostPolicy == HostPolicy(.only(["navd.example.com"])))
        let fromEnvironment = try ServerConfiguration.parse(arguments: [], environment: ["NAVD_ALLOWED_HOSTS": "*"])
        #expect(fromEnvironment.hostPolicy == HostPolicy(.any))
        #expect(throws: ServerConfiguration.Invalid.self) {
            try ServerConfiguration.parse(arguments: ["--allowed-hosts", "127.0.0.1"], environment: [:])
        }
    }

    /// On a loopback address, a page rebound to navd (its own name in `Host`) can neither read
    /// navd's answers nor make a session, while the names and addresses navd serves, and the
    /// probes, are answered.
    @Test func aRequestForAnotherNameIsRefusedAndChangesNothing() async throws {
        let server = try await TestServer()
        defer { Task { await server.stop() } }
        for target in ["/features", "/metrics", "/", "/sessions/0123/navigation", "/nowhere"] {
            let refused = try await Self.send(server, "GET \(target) HTTP/1.1\r\nHost: evil.example:\(server.port)\r\n\r\n")
            #expect(refused.status == 421, "\(target)")
            #expect(refused.json["error"]?["code"] == "misdirected_request", "\(target)")
            #expect(refused.json["error"]?["message"]?.stringValue?.contains("--allowed-hosts") == true, "\(refused.text)")
            #expect(refused.header("X-Request-ID") != nil)
        }
        let before = try await Self.openSessions(server)
        let body = #"{"feature":"counter"}"#
        let create = "POST /sessions HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        #expect(try await Self.send(server, create).status == 421)
        // A client waiting for `100 Continue` is refused before it uploads the body.
        let client = try server.client()
        try await client.send("POST /sessions HTTP/1.1\r\nHost: evil.example\r\nContent-Type: application/json\r\nContent-Length: 20\r\nExpect: 100-continue\r\n\r\n")
        #expect(try await client.readResponse().status == 421)
        #expect(try await Self.openSessions(server) == before, "nothing was made")
        // An absolute-form target names the host, whatever Host says (RFC 9112 3.2.2).
        #expect(try await Self.send(server, "GET http://evil.example/features HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status == 421)
        #expect(try await Self.send(server, "GET http://localhost/features HTTP/1.1\r\nHost: evil.example\r\n\r\n").status == 200)

        for host in ["localhost:\(server.port)", "LOCALHOST.", "app.localhost", "127.0.0.1:\(server.port)", "[::1]:\(server.port)"] {
            #expect(try await Self.send(server, "GET /features HTTP/1.1\r\nHost: \(host)\r\n\r\n").status == 200, "\(host)")
        }
        #expect(try await Self.send(server, "GET /features HTTP/1.0\r\n\r\n").status == 200, "no host named")
        for probe in ["/healthz", "/readyz"] {
            #expect(try await Self.send(server, "GET \(probe) HTTP/1.1\r\nHost: pod-7.internal\r\n\r\n").status == 200, "\(probe)")
        }
        #expect(try await Self.send(server, body: body, host: "localhost").status == 201)
    }

    /// A server told its names answers for them (and addresses) only; `*` for every name.
    @Test func theConfiguredNamesAreTheOnesAnswered() async throws {
        let named = try await TestServer(configure: { $0.allowedHosts = HostPolicy(.only(["navd.example.com"])) })
        defer { Task { await named.stop() } }
        #expect(try await Self.send(named, body: #"{"feature":"counter"}"#, host: "navd.example.com").status == 201)
        #expect(try await Self.send(named, "GET /features HTTP/1.1\r\nHost: localhost\r\n\r\n").status == 421)
        #expect(try await Self.send(named, "GET /features HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").status == 200)
        let open = try await TestServer(configure: { $0.allowedHosts = HostPolicy(.any) })
        defer { Task { await open.stop() } }
        #expect(try await Self.send(open, "GET /features HTTP/1.1\r\nHost: anything.example\r\n\r\n").status == 200)
    }

    private static func openSessions(_ server: TestServer) async throws -> String? {
        let metrics = try await server.client().request("GET", "/metrics").text
        return metrics.split(separator: "\n").first { $0.hasPrefix("navd_sessions_open ") }.map(String.init)
    }

    private static func send(_ server: TestServer, _ request: String) async throws -> LoopbackClient.Response {
        let client = try server.client()
        try await client.send(request)
        return try await client.readResponse()
    }

    private static func send(_ server: TestServer, body: String, host: String) async throws -> LoopbackClient.Response {
        try await send(server, "POST /sessions HTTP/1.1\r\nHost: \(host)\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)")
    }

    private static func refusal(_ setting: String) -> String? {
        do throws(HostPolicy.Refusal) { _ = try HostPolicy.parse(setting) } catch { return error.description }
        return nil
    }
}
