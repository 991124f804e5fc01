import Foundation
import NavigationCore
import NavServer
import Testing
import TestSupport

/// The `navd` executable itself: its flags, its health check and its shutdown on SIGTERM.
@Suite(.serialized) struct ProcessTests {
    /// `NAVD_BINARY` if set (CI points it at the release build too), else the binary
    /// `swift build` put next to the test bundle.
    static var navd: URL? {
        if let path = ProcessInfo.processInfo.environment["NAVD_BINARY"] { return URL(fileURLWithPath: path) }
        let candidates = [
            Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("navd"),
            URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(".build/debug/navd"),
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0.path) }
    }

    final class Running: @unchecked Sendable {
        let process = Process()
        let output = Pipe()
        let errors = Pipe()
        var port = 0
        /// The `listening` line.
        var listening: JSON = .null
        /// Where its SQLite store lives: a fresh directory unless a restart names the last one.
        let dataDirectory: String

        /// A directory this process made for itself, removed with it; a restart's is its caller's.
        private let ownsDataDirectory: Bool

        /// - Parameter launcher: a program that runs navd, its path first (`nohup`).
        init(_ arguments: [String], environment: [String: String] = [:], unsetting: [String] = [], dataDirectory: String? = nil,
             launcher: String? = nil) throws {
            guard let navd = ProcessTests.navd else { throw LoopbackClient.Failure(description: "navd binary not built") }
            self.dataDirectory = dataDirectory ?? FileManager.default.temporaryDirectory.appendingPathComponent("navd-process-\(UUID().uuidString)").path
            ownsDataDirectory = dataDirectory == nil
            process.executableURL = launcher.map { URL(fileURLWithPath: $0) } ?? navd
            process.arguments = launcher == nil ? arguments : [navd.path] + arguments
            var variables = ProcessInfo.processInfo.environment.merging(["NAVD_DATA_DIR": self.dataDirectory]) { $1 }.merging(environment) { $1 }
            for name in unsetting { variables[name] = nil }
            process.environment = variables
            process.standardOutput = output
            process.standardError = errors
            try process.run()
        }

        /// No test leaves a navd behind, whatever it expected.
        deinit {
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                process.waitUntilExit()
            }
            if ownsDataDirectory { try? FileManager.default.removeItem(atPath: dataDirectory) }
        }

        /// Its exit status, or nil while it runs: Foundation traps when asked for a running
        /// process's, which would end every test in the run instead of failing this one.
        var exitStatus: Int32? { process.isRunning ? nil : process.terminationStatus }
        var exitReason: Process.TerminationReason? { process.isRunning ? nil : process.terminationReason }

        /// How many times slower than the debug or release build the binary under test runs:
        /// `NAVD_TEST_SLOWDOWN`, set by the sanitizer test (whose builds are several times slower
        /// and share two cores with every other process test), else 1. Time bounds the tests hold
        /// navd to are stretched by it; the bounds navd holds itself to are not.
        static let slowdown = ProcessInfo.processInfo.environment["NAVD_TEST_SLOWDOWN"].flatMap { Int($0) }.map { max(1, $0) } ?? 1

        static func stretched(_ bound: Duration) -> Duration { bound * slowdown }

        /// What navd wrote that no one has read yet.
        private var unread = Data()

        /// Reads lines until the `listening` one, for the port; returns the lines before it.
        @discardableResult
        func waitUntilListening() throws -> [JSON] {
            var before: [JSON] = []
            while true {
                let line = try nextLine(within: nil)
                if line["event"] == "listening", let port = line["port"]?.intValue {
                    self.port = port
                    listening = line
                    return before
                }
                before.append(line)
            }
        }

        /// Reads lines until one with `event`, within `timeout` (stretched by `slowdown`); returns it.
        func waitForLine(_ event: String, timeout: Duration = .seconds(10)) throws -> JSON {
            let deadline = ContinuousClock.now + Self.stretched(timeout)
            while true {
                let line = try nextLine(within: deadline)
                if line["event"]?.stringValue == event { return line }
            }
        }

        /// The next line navd writes; a failure once navd exits or `deadline` passes.
        private func nextLine(within deadline: ContinuousClock.Instant?) throws -> JSON {
            while true {
                if let newline = unread.firstIndex(of: 0x0A) {
                    let line = (try? JSONParser.parse(Array(unread[unread.startIndex..<newline]))) ?? .null
                    unread = Data(unread[(newline + 1)...])
                    return line
                }
                if let deadline {
                    let left = deadline - ContinuousClock.now
                    var ready = pollfd(fd: output.fileHandleForReading.fileDescriptor, events: Int16(POLLIN), revents: 0)
                    guard left > .zero, poll(&ready, 1, Int32(left / .milliseconds(1)) + 1) > 0 else {
                        throw LoopbackClient.Failure(description: "no line in time; navd wrote: \(String(decoding: unread, as: UTF8.self))")
                    }
                }
                let chunk = output.fileHandleForReading.availableData
                guard !chunk.isEmpty else { throw LoopbackClient.Failure(description: "navd exited: \(String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self))") }
                unread += chunk
            }
        }

        /// Stops navd with SIGTERM and returns the log lines it wrote after `listening` (and
        /// after any line read since): what a test reads once the process has said everything.
        func stopAndReadLog() async -> [JSON] {
            process.terminate()
            _ = await wait(timeout: .seconds(10))
            return String(decoding: unread + output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                .split(separator: "\n").compactMap { try? JSONParser.parse(Array($0.utf8)) }
        }

        /// Waits up to `timeout` (stretched by `slowdown`) for the process to exit.
        func wait(timeout: Duration) async -> Bool {
            let deadline = ContinuousClock.now + Self.stretched(timeout)
            while process.isRunning, ContinuousClock.now < deadline { try? await Task.sleep(for: .milliseconds(20)) }
            return !process.isRunning
        }
    }

    /// SIGTERM, and a closing terminal's SIGHUP, stop navd gracefully: never by SIGHUP's default
    /// action, which would end the process without a drain.
    @Test(arguments: [SIGTERM, SIGHUP])
    func aStopSignalEndsInMemorySessionsWithEndAndExitsZeroWithinFiveSeconds(_ signal: Int32) async throws {
        let navd = try Running(["--port", "0", "--store", "memory", "--log-requests", "off", "--fact-base-url", "http://127.0.0.1:9"])
        try navd.waitUntilListening()
        let created = try await LoopbackClient(port: navd.port).request("POST", "/sessions", json: #"{"feature":"counter"}"#)
        let id = try #require(created.json["id"]?.stringValue)
        let token = try #require(created.json["token"]?.stringValue)
        let stream = try LoopbackClient(port: navd.port)
        try await stream.send(LoopbackClient.format("GET", "/sessions/\(id)/events?token=\(token)"))
        _ = try await stream.readResponse()
        _ = try await stream.readEvents { $0.name == "snapshot" }

        let signalled = ContinuousClock.now
        kill(navd.process.processIdentifier, signal)
        let end = try await stream.readEvents { $0.name == "end" }
        #expect(end.last?.name == "end")
        #expect(end.last?.data["reason"]?.stringValue == "shutdown")
        #expect(await navd.wait(timeout: .seconds(5)))
        #expect(ContinuousClock.now - signalled < Running.stretched(.seconds(5)))
        #expect(navd.exitStatus == 0)
        #expect(navd.exitReason == .exit)
    }

    /// Started with SIGHUP ignored (`nohup navd &`), navd outlives the terminal that closes;
    /// SIGTERM still stops it.
    @Test func underNohupAHangUpDoesNotStopIt() async throws {
        let navd = try Running(["--port", "0", "--store", "memory", "--log-requests", "off"], launcher: "/usr/bin/nohup")
        try navd.waitUntilListening()
        #expect(navd.listening["store"] == "memory")
        kill(navd.process.processIdentifier, SIGHUP)
        #expect(await navd.wait(timeout: .seconds(1)) == false, "still running after SIGHUP")
        let answer = try await LoopbackClient(port: navd.port).request("GET", "/readyz")
        #expect(answer.status == 200)
        navd.process.terminate()
        #expect(await navd.wait(timeout: .seconds(5)))
        #expect(navd.exitStatus == 0)
    }

    /// SIGUSR1 asks for a copy of the store; one that keeps nothing on disk says it has none to
    /// give, and serves on.
    @Test func aBackupSignalToAServerInMemorySaysSoAndItServesOn() async throws {
        let navd = try Running(["--port", "0", "--store", "memory", "--log-requests", "off"])
        try navd.waitUntilListening()
        kill(navd.process.processIdentifier, SIGUSR1)
        let line = try navd.waitForLine("backup_unsupported")
        #expect(line["store"] == "memory")
        #expect(line["level"] == "warn")
        #expect(try await LoopbackClient(port: navd.port).request("GET", "/readyz").status == 200)
        navd.process.terminate()
        #expect(await navd.wait(timeout: .seconds(5)))
        #expect(navd.exitStatus == 0)
    }

    @Test func badSettingsExitWithCode2AndSayWhy() async throws {
        for (arguments, environment, fragment) in [
            (["--port", "70000"], [String: String](), "--port"),
            (["--fact-base-url", "ftp://x"], [:], "--fact-base-url"),
            (["--bogus"], [:], "unknown option"),
            ([], ["PORT": "eighty"], "PORT"),
            (["--max-sessions"], [:], "needs a value"),
            // Not an address at all: refused while parsing, never a failed start (exit 1).
            (["--host", "999.1.1.1"], [:], "--host"),
            ([], ["NAVD_HOST": "example.com"], "NAVD_HOST"),
            // A well-formed address this machine does not have (TEST-NET-1): unusable as set.
            (["--host", "192.0.2.1", "--port", "0"], [:], "--host"),
            (["--cors-origin", "https://app.example/app"], [:], "path"),
            (["--cors-origin", "*,https://app.example"], [:], "--cors-origin"),
            ([], ["NAVD_CORS_ORIGIN": "https://user@app.example"], "NAVD_CORS_ORIGIN"),
            (["--cors-origin", "*", "--cors-headers", "trace parent"], [:], "--cors-headers"),
            (["--cors-headers", "traceparent"], [:], "without --cors-origin"),
            (["--allowed-hosts", "127.0.0.1"], [:], "--allowed-hosts"),
            ([], ["NAVD_ALLOWED_HOSTS": "..example.com"], "NAVD_ALLOWED_HOSTS"),
        ] {
            let navd = try Running(arguments, environment: environment)
            #expect(await navd.wait(timeout: .seconds(5)))
            #expect(navd.exitStatus == 2, "\(arguments) \(environment)")
            let message = String(decoding: navd.errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            #expect(message.contains(fragment), "\(message)")
        }
    }

    @Test func versionPrintsTheVersionAndExitsZero() async throws {
        let navd = try Running(["--version"])
        #expect(await navd.wait(timeout: .seconds(5)))
        #expect(navd.exitStatus == 0)
        let printed = String(decoding: navd.output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(printed == "navd \(BuildInfo.version)\n")
        #expect(BuildInfo.version.split(separator: ".").count == 3)
    }

    @Test func anAddressInUseIsNotABadSetting() async throws {
        let first = try Running(["--port", "0", "--store", "memory", "--log-requests", "off"])
        try first.waitUntilListening()
        let second = try Running(["--port", String(first.port), "--store", "memory"])
        #expect(await second.wait(timeout: .seconds(5)))
        // The holder may be on its way out (a restart): worth retrying, so not the usage code 2.
        #expect(second.exitStatus == 1)
        let message = String(decoding: second.errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(message.contains("in use"), "\(message)")
        first.process.terminate()
        _ = await first.wait(timeout: .seconds(5))
    }

    @Test func helpListsEverySetting() async throws {
        let navd = try Running(["--help"])
        #expect(await navd.wait(timeout: .seconds(5)))
        #expect(navd.exitStatus == 0)
        let help = String(decoding: navd.output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        for flag in ["--host", "NAVD_HOST", "--port", "PORT", "--fact-base-url", "FACT_BASE_URL", "--connect-delay-ms",
                     "CONNECT_DELAY_MS", "--max-sessions", "--max-connections", "--event-buffer", "--max-state-bytes", "NAVD_MAX_STATE_BYTES", "--idle-session-ttl", "--cors-origin",
                     "--cors-headers", "NAVD_CORS_HEADERS", "--allowed-hosts", "NAVD_ALLOWED_HOSTS", "--store", "--database-url", "DATABASE_URL", "--version",
                     "navd openapi [--output FILE]"] {
            #expect(help.contains(flag), "\(flag)")
        }
        // The descriptions start in one column, whatever the longest flag (--store's) or
        // variable (NAVD_EVENT_BUFFER_BYTES), each column apart from the next.
        let starts = Set(["address to listen on", "encoded bytes of events", "where sessions live", "print the version"].map { text in
            help.split(separator: "\n").first { $0.contains(text) }.flatMap { line in
                line.range(of: text).map { line.distance(from: line.startIndex, to: $0.lowerBound) }
            }
        })
        #expect(starts.count == 1, "\(help)")
        #expect(!help.contains("BYTESencoded") && !help.contains("memoryNAVD"))
    }

    @Test func checkHealthAsksTheRunningServer() async throws {
        let navd = try Running(["--port", "0", "--log-requests", "off"])
        try navd.waitUntilListening()
        #expect(navd.listening["allowed_hosts"] == ".localhost", "a loopback server answers for localhost, and says so")
        let healthy = try Running(["--check-health", "--port", String(navd.port)])
        #expect(await healthy.wait(timeout: .seconds(5)))
        #expect(healthy.exitStatus == 0)
        navd.process.terminate()
        #expect(await navd.wait(timeout: .seconds(5)))
        // Nothing answers there (the stopped server's port could be another test's by now).
        let closed = try ClosedPort()
        let unhealthy = try Running(["--check-health", "--port", String(closed.port)])
        #expect(await unhealthy.wait(timeout: .seconds(5)))
        #expect(unhealthy.exitStatus == 1)
        let said = String(decoding: unhealthy.errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(said.contains("unhealthy: cannot connect to 127.0.0.1:\(closed.port)"), "a failing health check says why: \(said)")
    }

    @Test func requestsAreLoggedAsJSONLinesWithoutTokens() async throws {
        let navd = try Running(["--port", "0"])
        let started = Date().timeIntervalSince1970
        try navd.waitUntilListening()
        let created = try await LoopbackClient(port: navd.port).request("POST", "/sessions", json: #"{"feature":"counter"}"#)
        let id = try #require(created.json["id"]?.stringValue)
        let token = try #require(created.json["token"]?.stringValue)
        let client = try LoopbackClient(port: navd.port)
        _ = try await client.request("GET", "/sessions/\(id)/navigation?token=\(token)&wait=false&x=1")
        _ = try await client.request("GET", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")])
        navd.process.terminate()
        #expect(await navd.wait(timeout: .seconds(5)))
        let log = String(decoding: navd.output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(!log.contains(token))
        let lines = log.split(separator: "\n").compactMap { try? JSONParser.parse(String($0)) }
        let requests = lines.filter { $0["method"] != nil }
        #expect(requests.count == 3)
        #expect(requests.contains { $0["path"] == .string("/sessions/\(id)/navigation?wait=false") && $0["status"] == 401 })
        #expect(requests.allSatisfy { $0["duration_ms"] != nil && $0["status"] != nil && $0["event"] == "request" })
        #expect(requests.allSatisfy { $0["request_id"]?.stringValue != nil && $0["remote"]?.stringValue?.hasPrefix("127.0.0.1:") == true && $0["bytes"]?.intValue != nil })
        // Every line, the start and stop lines included, has its time (RFC 3339, UTC, milliseconds) and a level.
        #expect(navd.listening["version"] != nil)
        #expect(navd.listening["store"] == "sqlite")
        #expect(lines.last?["event"] == "stopped")
        let stopping = lines.first { $0["event"] == "stopping" }
        #expect(stopping?["signal"] == "SIGTERM" && stopping?["grace_seconds"] == 0, "the stop's start is logged: \(String(describing: stopping))")
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        for line in [navd.listening] + lines {
            #expect(RequestLogTests.isRFC3339Milliseconds(line["time"]?.stringValue), "\(line)")
            let time = formatter.date(from: line["time"]?.stringValue ?? "")?.timeIntervalSince1970 ?? 0
            #expect(time > started - 1 && time < started + 30, "\(line)")
            #expect(line["level"] == "info", "\(line)")
        }
    }

    /// A log shipper that stops reading stdout holds up nothing: requests are answered, lines
    /// past the buffer are dropped, and SIGTERM still ends in a clean stop, exit 0.
    @Test func aStdoutNobodyReadsHoldsUpNeitherRequestsNorTheStop() async throws {
        let navd = try Running(["--port", "0", "--store", "memory"])
        try navd.waitUntilListening()
        // Nothing reads the pipe from here on: its 64 KiB fill with request lines, then the log's buffer.
        let client = try LoopbackClient(port: navd.port)
        for _ in 0..<2_000 {
            let answer = try await client.request("GET", "/healthz", headers: [("X-Request-ID", String(repeating: "r", count: 100))])
            #expect(answer.status == 200)
        }
        let signalled = ContinuousClock.now
        navd.process.terminate()
        #expect(await navd.wait(timeout: .seconds(8)))
        #expect(ContinuousClock.now - signalled < Running.stretched(.seconds(5)))
        #expect(navd.exitStatus == 0, "\(String(decoding: navd.errors.fileHandleForReading.availableData, as: UTF8.self))")
    }

    /// The environment a process started with, from /proc (Linux).
    private static func startingEnvironment(_ pid: Int32) -> [String] {
        guard let bytes = FileManager.default.contents(atPath: "/proc/\(pid)/environ") else { return [] }
        return bytes.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
    }

    #if os(Linux)
    @Test func theServerRunsWithALargerAllocatorCacheUnlessTheEnvironmentChoosesOne() async throws {
        // Started without it, the same process (same id, same name) runs again with the cache set.
        let tuned = try Running(["--port", "0", "--log-requests", "off", "--store", "memory"],
                                environment: ["GLIBC_TUNABLES": ""], unsetting: ["NAVD_ALLOCATOR_TUNED"])
        try tuned.waitUntilListening()
        let pid = tuned.process.processIdentifier
        #expect(Self.startingEnvironment(pid).contains("GLIBC_TUNABLES=glibc.malloc.tcache_count=64"))
        let name = try String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(name == String(try #require(ProcessTests.navd).lastPathComponent.prefix(15)))
        #expect(try await LoopbackClient(port: tuned.port).request("GET", "/healthz").status == 200)
        // A size the operator chose is left as it is.
        let chosen = try Running(["--port", "0", "--log-requests", "off", "--store", "memory"],
                                 environment: ["GLIBC_TUNABLES": "glibc.malloc.tcache_count=5"], unsetting: ["NAVD_ALLOCATOR_TUNED"])
        try chosen.waitUntilListening()
        #expect(Self.startingEnvironment(chosen.process.processIdentifier).contains("GLIBC_TUNABLES=glibc.malloc.tcache_count=5"))
        // A second start never starts again, whatever glibc left of the tunable.
        let second = try Running(["--port", "0", "--log-requests", "off", "--store", "memory"],
                                 environment: ["GLIBC_TUNABLES": "", "NAVD_ALLOCATOR_TUNED": "1"])
        try second.waitUntilListening()
        #expect(Self.startingEnvironment(second.process.processIdentifier).contains("GLIBC_TUNABLES="))
        for navd in [tuned, chosen, second] {
            navd.process.terminate()
            #expect(await navd.wait(timeout: .seconds(5)))
            #expect(navd.exitStatus == 0)
        }
    }
    #endif

    /// Resident memory of a process, from /proc (Linux).
    private static func residentBytes(_ pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "") else { return nil }
        return kilobytes * 1024
    }

    @Test func theMemoryOfEndedSessionsReturnsToTheSystem() async throws {
        let navd = try Running(["--port", "0", "--log-requests", "off", "--fact-base-url", "http://127.0.0.1:9"])
        try navd.waitUntilListening()
        let pid = navd.process.processIdentifier
        // 900 durable writes of 60 KB: on a busy machine one may wait for a slow sync.
        let client = try LoopbackClient(port: navd.port, timeoutSeconds: 30)
        let before = try #require(Self.residentBytes(pid))
        var sessions: [(id: String, token: String)] = []
        for _ in 0..<6 {
            let created = try await client.request("POST", "/sessions", json: #"{"feature":"gallery","state":{"text":""}}"#)
            let id = try #require(created.json["id"]?.stringValue)
            let token = try #require(created.json["token"]?.stringValue)
            let editor = try #require(created.json["navigation"]?["presentations"]?[0]?["id"]?.stringValue)
            // Each session's event buffer fills to its 8 MiB bound with 60 KB texts.
            for round in 0..<150 {
                let text = String(repeating: "x", count: 60_000) + String(round)
                let written = try await client.request("PUT", "/sessions/\(id)/features/\(editor)/bindings/text", token: token, json: #""\#(text)""#)
                #expect(written.status == 200)
            }
            sessions.append((id, token))
        }
        let full = try #require(Self.residentBytes(pid))
        #expect(full - before > 40 << 20, "six full event buffers hold about 48 MiB")
        for session in sessions {
            #expect(try await client.request("DELETE", "/sessions/\(session.id)", headers: [("Authorization", "Bearer \(session.token)")]).status == 204)
        }
        // Returned within seconds (the allocator trims as the buffers go), looked at every 100 ms.
        var after = full
        let deadline = ContinuousClock.now + .seconds(10)
        while after - before >= (full - before) / 3, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
            after = try #require(Self.residentBytes(pid))
        }
        #expect(after - before < (full - before) / 3, "RSS \(before >> 20) → \(full >> 20) → \(after >> 20) MiB")
        navd.process.terminate()
        _ = await navd.wait(timeout: .seconds(5))
    }
}
