import Foundation
@testable import NavServer
import NavigationCore
import Testing
import TestSupport

@Suite struct MetricsTests {
    @Test func histogramBucketsAreCumulativeAndRequestsCountByRouteMethodAndCode() {
        let metrics = Metrics()
        metrics.requestFinished(route: .actions, method: "POST", status: 200, seconds: 0.0007)
        metrics.requestFinished(route: .actions, method: "POST", status: 200, seconds: 0.3)
        metrics.requestFinished(route: .actions, method: "POST", status: 422, seconds: 0.3)
        metrics.requestFinished(route: nil, method: "BREW", status: 404, seconds: 0.00001)
        let text = metrics.render(sessionsOpen: 0, memory: nil)
        for line in [
            #"navd_http_requests_total{route="actions",method="POST",code="200"} 2"#,
            #"navd_http_requests_total{route="actions",method="POST",code="422"} 1"#,
            #"navd_http_requests_total{route="unknown",method="other",code="404"} 1"#,
            #"navd_http_request_duration_seconds_bucket{route="actions",method="POST",code="200",le="0.0005"} 0"#,
            #"navd_http_request_duration_seconds_bucket{route="actions",method="POST",code="200",le="0.001"} 1"#,
            #"navd_http_request_duration_seconds_bucket{route="actions",method="POST",code="200",le="0.25"} 1"#,
            #"navd_http_request_duration_seconds_bucket{route="actions",method="POST",code="200",le="0.5"} 2"#,
            #"navd_http_request_duration_seconds_bucket{route="actions",method="POST",code="200",le="+Inf"} 2"#,
            #"navd_http_request_duration_seconds_count{route="actions",method="POST",code="200"} 2"#,
            #"navd_http_request_duration_seconds_count{route="actions",method="POST",code="422"} 1"#,
        ] {
            #expect(text.contains(line + "\n"), "missing: \(line)")
        }
        #expect(!text.contains(#"route="healthz""#), "routes without traffic are left out")
        #expect(!text.contains("BREW"), "methods are a fixed set")
    }

    @Test func requestsThatWaitAreTimedApartWithBucketsUpToAMinute() {
        let metrics = Metrics()
        metrics.requestFinished(route: .actions, method: "POST", status: 200, seconds: 0.001)
        metrics.requestFinished(route: .actions, method: "POST", status: 200, seconds: 20, waited: true)
        let text = metrics.render(sessionsOpen: 0, memory: nil)
        for line in [
            #"navd_http_requests_total{route="actions",method="POST",code="200"} 2"#,
            #"navd_http_request_duration_seconds_count{route="actions",method="POST",code="200"} 1"#,
            #"navd_http_request_duration_seconds_bucket{route="actions",method="POST",code="200",le="10.0"} 1"#,
            #"navd_http_wait_request_duration_seconds_bucket{route="actions",method="POST",code="200",le="10.0"} 0"#,
            #"navd_http_wait_request_duration_seconds_bucket{route="actions",method="POST",code="200",le="30.0"} 1"#,
            #"navd_http_wait_request_duration_seconds_bucket{route="actions",method="POST",code="200",le="60.0"} 1"#,
            #"navd_http_wait_request_duration_seconds_count{route="actions",method="POST",code="200"} 1"#,
            #"navd_http_wait_request_duration_seconds_sum{route="actions",method="POST",code="200"} 20.0"#,
        ] {
            #expect(text.contains(line + "\n"), "missing: \(line)")
        }
    }

    #if os(Linux)
    @Test func procSelfStatIsReadFromTheLastParenthesis() throws {
        let line = "4242 (a (weird) name) S 1 4242 4242 0 -1 4194560 500 0 0 0 150 25 0 0 20 0 9 0 123456 700000000 9000 18446744073709551615"
        let stat = try #require(ProcessMetrics.SelfStat.parse(line))
        #expect(stat.userTicks == 150)
        #expect(stat.systemTicks == 25)
        #expect(stat.startTicks == 123456)
        #expect(stat.virtualBytes == 700_000_000)
        #expect(stat.residentPages == 9000)
        #expect(ProcessMetrics.SelfStat.parse("4242 (truncated) S 1 2") == nil)
    }
    #endif

    /// Traffic of every kind, then the exposition a real server sends.
    static func scrape() async throws -> String {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        // `?wait=true` may take its whole 10 s on a busy machine: the client waits longer.
        let client = try server.client(timeoutSeconds: 30)
        _ = try await client.act(id, token: token, "incrementButtonTapped")
        _ = try await client.act(id, token: token, "factButtonTapped", query: "?wait=true")
        _ = try await client.act(id, token: token, "nope")
        _ = try await client.request("GET", "/nope")
        _ = try await client.request("BREW", "/healthz")
        _ = try await client.request("HEAD", "/features")
        let stream = try server.client()
        try await stream.send(LoopbackClient.format("GET", "/sessions/\(id)/events?token=\(token)"))
        _ = try await stream.readResponse(head: true)
        _ = try await stream.readEvents { $0.name == "snapshot" }
        let text = try await client.request("GET", "/metrics").text
        await server.stop()
        return text
    }

    @Test func aLiveServerLabelsRequestsByCodeAndMethodAndTimesWaitsApart() async throws {
        let text = try await Self.scrape()
        for line in [
            #"navd_http_requests_total{route="actions",method="POST",code="200"} 2"#,
            #"navd_http_requests_total{route="actions",method="POST",code="422"} 1"#,
            #"navd_http_requests_total{route="unknown",method="GET",code="404"} 1"#,
            #"navd_http_requests_total{route="healthz",method="other",code="405"} 1"#,
            #"navd_http_requests_total{route="features",method="HEAD",code="200"} 1"#,
            #"navd_http_requests_total{route="events",method="GET",code="200"} 1"#,
            #"navd_http_request_duration_seconds_count{route="actions",method="POST",code="200"} 1"#,
            #"navd_http_wait_request_duration_seconds_count{route="actions",method="POST",code="200"} 1"#,
            "navd_build_info{version=\"\(BuildInfo.version)\"} 1",
        ] {
            #expect(text.contains(line + "\n"), "missing: \(line)")
        }
    }

    /// The value of an unlabelled sample.
    static func value(_ name: String, in text: String) -> Double? {
        text.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Double($0.split(separator: " ")[1]) }
    }

    @Test func aLiveServerReportsItsProcess() async throws {
        let text = try await Self.scrape()
        #if os(Linux)
        let resident = try #require(Self.value("process_resident_memory_bytes", in: text))
        #expect(resident > 1_000_000)
        let fds = try #require(Self.value("process_open_fds", in: text))
        #expect(fds >= 3)
        #expect(try #require(Self.value("process_max_fds", in: text)) >= fds)
        #expect(try #require(Self.value("process_virtual_memory_bytes", in: text)) >= resident)
        let start = try #require(Self.value("process_start_time_seconds", in: text))
        let now = Date().timeIntervalSince1970
        // This test process started the server: it started at most a few minutes ago.
        #expect(start <= now + 1 && start > now - 3600, "\(start) vs \(now)")
        #endif
        #expect(try #require(Self.value("process_cpu_seconds_total", in: text)) > 0)
    }

    /// Prometheus' text format, as far as its conventions go: every sample follows its
    /// family's HELP and TYPE; counters end in `_total`; histograms have buckets, sum and count;
    /// names say their unit.
    @Test func theExpositionFollowsPrometheusConventions() async throws {
        let text = try await Self.scrape()
        var types: [String: String] = [:]
        var helped: Set<String> = []
        for line in text.split(separator: "\n").map(String.init) {
            if line.hasPrefix("# HELP ") {
                let name = String(line.dropFirst(7).prefix { $0 != " " })
                #expect(helped.insert(name).inserted, "HELP twice: \(name)")
                #expect(line.count > 8 + name.count, "empty HELP: \(name)")
            } else if line.hasPrefix("# TYPE ") {
                let parts = line.split(separator: " ")
                #expect(parts.count == 4)
                let (name, type) = (String(parts[2]), String(parts[3]))
                #expect(helped.contains(name), "TYPE before HELP: \(name)")
                #expect(types.updateValue(type, forKey: name) == nil, "TYPE twice: \(name)")
                #expect(["counter", "gauge", "histogram"].contains(type))
                #expect((type == "counter") == name.hasSuffix("_total"), "\(name) is a \(type)")
                #expect(name.wholeMatch(of: /[a-z_][a-z0-9_]*/) != nil, "\(name)")
            } else {
                let name = String(line.prefix { $0 != "{" && $0 != " " })
                let family = types[name] != nil ? name
                    : ["_bucket", "_sum", "_count"].compactMap { name.hasSuffix($0) ? String(name.dropLast($0.count)) : nil }.first ?? name
                #expect(types[family] != nil, "sample without TYPE: \(line)")
                #expect(Double(line.split(separator: " ").last ?? "") != nil, "not a number: \(line)")
            }
        }
        for name in ["process_resident_memory_bytes", "process_open_fds", "process_cpu_seconds_total", "process_start_time_seconds",
                     "navd_build_info", "navd_http_requests_total", "navd_http_request_duration_seconds",
                     "navd_http_wait_request_duration_seconds"] {
            #expect(types[name] != nil, "missing \(name)")
        }
    }

    static let promtool: String? = ["/usr/bin/promtool", "/usr/local/bin/promtool"].first { FileManager.default.isExecutableFile(atPath: $0) }

    @Test(.enabled(if: promtool != nil, "promtool is not installed (Debian: apt-get install prometheus); scripts/test.sh installs it and checks a live navd"))
    func promtoolAcceptsTheExposition() async throws {
        let text = try await Self.scrape()
        let process = Process()
        process.executableURL = URL(fileURLWithPath: try #require(Self.promtool))
        process.arguments = ["check", "metrics"]
        let input = Pipe()
        let output = Pipe()
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()
        try input.fileHandleForWriting.write(contentsOf: Data(text.utf8))
        try input.fileHandleForWriting.close()
        let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        #expect(process.terminationStatus == 0, "\(said)")
        #expect(said.isEmpty, "promtool's lint: \(said)")
    }
}
