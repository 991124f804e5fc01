import Foundation
import NavigationCore
import Testing
import TestSupport

/// The `navd` executable on the PostgreSQL store, against a private server this test process
/// starts on loopback: `kill -9` loses nothing acknowledged, and a stream resumes exactly.
@Suite(.serialized) struct PostgresProcessTests {
    typealias Running = ProcessTests.Running
    static let flags = ["--port", "0", "--log-requests", "off", "--fact-base-url", "http://127.0.0.1:9", "--store", "postgres"]

    @Test(.enabled(if: PostgresServer.isAvailable, "no PostgreSQL server could be started here (initdb/pg_ctl missing, or no user to run it as)"))
    func killMinusNineKeepsStateTreeAndEventIDs() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let first = try Running(Self.flags + ["--database-url", url])
        try first.waitUntilListening()
        let (id, token) = try await DurableProcessTests.createCounter(port: first.port)
        let client = try LoopbackClient(port: first.port)
        var seen: [Int] = []
        for action in ["incrementButtonTapped", "incrementButtonTapped", "settingsButtonTapped", "incrementButtonTapped"] {
            let answer = try await client.request("POST", "/sessions/\(id)/actions", token: token, json: #"{"target":"root","action":"\#(action)"}"#)
            #expect(answer.status == 200, "\(answer.text)")
            seen += answer.json["events"]?.arrayValue?.compactMap { $0["id"]?.intValue } ?? []
        }
        let auth = [("Authorization", "Bearer \(token)")]
        let before = try await client.request("GET", "/sessions/\(id)", headers: auth)
        let treeBefore = try await client.request("GET", "/sessions/\(id)/navigation", headers: auth)
        kill(first.process.processIdentifier, SIGKILL)
        #expect(await first.wait(timeout: .seconds(5)))

        // The URL from the environment this time.
        let second = try Running(Self.flags, environment: ["DATABASE_URL": url])
        defer { second.process.terminate() }
        try second.waitUntilListening()
        let after = try LoopbackClient(port: second.port)
        let restored = try await after.request("GET", "/sessions/\(id)", headers: auth)
        #expect(restored.status == 200, "\(restored.text)")
        #expect(restored.json == before.json, "same version and state")
        let treeAfter = try await after.request("GET", "/sessions/\(id)/navigation", headers: auth)
        #expect(treeAfter.json == treeBefore.json, "same tree, same ids")
        #expect(try await after.request("GET", "/sessions/\(id)", headers: [("Authorization", "Bearer wrong")]).status == 401)

        let more = try await after.request("POST", "/sessions/\(id)/actions", token: token, json: #"{"target":"root","action":"incrementButtonTapped"}"#)
        #expect(more.status == 200)
        let newIDs = more.json["events"]?.arrayValue?.compactMap { $0["id"]?.intValue } ?? []
        #expect(!newIDs.isEmpty && newIDs.allSatisfy { $0 > (seen.max() ?? 0) }, "event ids go on, never reused")
        let resumed = try LoopbackClient(port: second.port)
        let from = try #require(seen.first)
        try await resumed.send(LoopbackClient.format("GET", "/sessions/\(id)/events", headers: auth + [("Last-Event-ID", String(from))]))
        _ = try await resumed.readResponse()
        let last = try #require(newIDs.last)
        let replayed = try await resumed.readEvents { $0.id == last }
        #expect(replayed.compactMap(\.id) == Array(seen.dropFirst()) + newIDs, "exactly the missed events, in order: no gap, no duplicate")
        #expect(!replayed.contains { $0.name == "snapshot" || $0.name == "end" })
        let metrics = try await after.request("GET", "/metrics", headers: [])
        #expect(metrics.text.contains("navd_sessions_claimed_total 1\n"), "loaded on demand, not at start")
        #expect(metrics.text.contains("navd_store_available 1\n"))
    }

    /// A database restart ends every connection of navd's, which libpq learns only on their next
    /// use: the next action is still acknowledged at once, and navd stays ready.
    @Test(.enabled(if: PostgresServer.isAvailable, "no PostgreSQL server could be started here (initdb/pg_ctl missing, or no user to run it as)"))
    func aDatabaseThatDroppedEveryConnectionCostsNoRequest() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let running = try Running(Self.flags + ["--database-url", url])
        defer { running.process.terminate() }
        try running.waitUntilListening()
        let (id, token) = try await DurableProcessTests.createCounter(port: running.port)
        let client = try LoopbackClient(port: running.port)
        let increment = #"{"target":"root","action":"incrementButtonTapped"}"#
        #expect(try await client.request("POST", "/sessions/\(id)/actions", token: token, json: increment).status == 200)

        let database = String(url.split(separator: "/").last ?? "")
        let ended = try await offThePool {
            try PostgresServer.shared().query("""
                SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
                WHERE datname = current_database() AND application_name = 'navd'
                """, database: database)
        }
        #expect(ended != ["0"], "navd's connections were ended")
        let answer = try await client.request("POST", "/sessions/\(id)/actions", token: token, json: increment)
        #expect(answer.status == 200, "acknowledged at the first try: \(answer.text)")
        #expect(try await client.request("GET", "/readyz", headers: []).status == 200)
        let stored = try await offThePool { try PostgresServer.shared().query("SELECT max(version) FROM navd_transactions", database: database) }
        #expect(stored == ["2"], "both increments are stored")
    }

    /// A database that stops answering while its kernel still takes the traffic (its process
    /// stopped, its disk hung) makes navd not ready within seconds, while the commit still
    /// waits, and the log says so; once the database answers, the waiting action is
    /// acknowledged, navd is ready again, and the log says that too.
    @Test(.enabled(if: PostgresServer.isAvailable, "no PostgreSQL server could be started here (initdb/pg_ctl missing, or no user to run it as)"))
    func aDatabaseThatStopsAnsweringMakesNavdNotReadyUntilItAnswers() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let proxy = try PostgresFaultProxy(to: try PostgresServer.shared().port)
        defer { proxy.stop() }
        let running = try Running(Self.flags + ["--database-url", proxy.url(database: String(url.split(separator: "/").last ?? ""))])
        defer { running.process.terminate() }
        try running.waitUntilListening()
        let (id, token) = try await DurableProcessTests.createCounter(port: running.port)
        let client = try LoopbackClient(port: running.port)
        let port = running.port

        proxy.stall(true)
        let stalledAt = ContinuousClock.now
        let action = Task {
            try await LoopbackClient(port: port).request("POST", "/sessions/\(id)/actions", token: token,
                                                         json: #"{"target":"root","action":"incrementButtonTapped"}"#)
        }
        var notReady: LoopbackClient.Response?
        while notReady == nil, ContinuousClock.now - stalledAt < ProcessTests.Running.stretched(.seconds(12)) {
            let ready = try await client.request("GET", "/readyz", headers: [])
            if ready.status == 503 { notReady = ready } else { try await Task.sleep(for: .milliseconds(200)) }
        }
        let refused = try #require(notReady, "not ready while the commit hangs")
        #expect(ContinuousClock.now - stalledAt >= .milliseconds(4500), "not before the commit has hung for a while")
        #expect(refused.json["error"]?["code"] == "storage_unavailable")
        #expect(refused.json["error"]?["message"]?.stringValue?.contains("has not finished a commit") == true, "\(refused.text)")
        // The log's watch looks once a second.
        try await Task.sleep(for: .milliseconds(1500))

        proxy.stall(false)
        let answer = try await action.value
        #expect(answer.status == 200, "acknowledged once the database answers: \(answer.text)")
        var readyAgain = false
        for _ in 0..<50 where !readyAgain {
            readyAgain = try await client.request("GET", "/readyz", headers: []).status == 200
            if !readyAgain { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(readyAgain)
        try await Task.sleep(for: .milliseconds(1500))

        let lines = await running.stopAndReadLog()
        let events = lines.compactMap { $0["event"]?.stringValue }
        let stalled = try #require(lines.first { $0["event"] == "store_stalled" }, "\(events)")
        #expect(stalled["level"] == "error")
        #expect((stalled["seconds"]?.intValue ?? 0) >= 5)
        let stalledIndex = try #require(events.firstIndex(of: "store_stalled"))
        #expect(events[stalledIndex...].contains("store_available"), "\(events)")
        #expect(!events.contains("store_unavailable"), "no commit failed: \(events)")
    }

    @Test func withoutADatabaseURLOrAReachableDatabaseNavdExitsWithCode2() async throws {
        let missing = try Running(Self.flags)
        #expect(await missing.wait(timeout: .seconds(5)))
        #expect(missing.exitStatus == 2)
        let said = String(decoding: missing.errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(said.contains("--store postgres needs --database-url or DATABASE_URL"), "\(said)")

        let unreachable = try Running(Self.flags + ["--database-url", "postgresql://navd:s3cret@127.0.0.1:9/navd?connect_timeout=2"])
        #expect(await unreachable.wait(timeout: .seconds(10)))
        #expect(unreachable.exitStatus == 2)
        let message = String(decoding: unreachable.errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(message.contains("cannot open the session store"), "\(message)")
        #expect(!message.contains("s3cret"), "the password is never printed")
    }
}
