import Foundation
import NavigationCore
import Testing
import TestSupport

/// The `navd` executable on its default SQLite store: a restart, graceful or `kill -9`, loses
/// nothing that was acknowledged, and a full disk is loud and temporary.
@Suite(.serialized) struct DurableProcessTests {
    typealias Running = ProcessTests.Running
    static let flags = ["--port", "0", "--log-requests", "off", "--fact-base-url", "http://127.0.0.1:9"]

    @Test func afterSigtermAndARestartAStreamResumesWithExactlyTheMissedEventsAndNoEnd() async throws {
        let directory = Self.freshDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try Running(Self.flags, dataDirectory: directory)
        try first.waitUntilListening()
        // The start says where sessions are kept, and that it made the store.
        #expect(first.listening["store"] == "sqlite")
        #expect(first.listening["store_path"]?.stringValue?.hasSuffix("/navd.sqlite3") == true)
        #expect(first.listening["store_created"] == true)
        let (id, token) = try await Self.createCounter(port: first.port)
        let stream = try LoopbackClient(port: first.port)
        try await stream.send(LoopbackClient.format("GET", "/sessions/\(id)/events", headers: [("Authorization", "Bearer \(token)")]))
        _ = try await stream.readResponse()
        _ = try await stream.readEvents { $0.name == "snapshot" }
        let client = try LoopbackClient(port: first.port)
        var seen: [Int] = []
        for action in ["incrementButtonTapped", "incrementButtonTapped", "settingsButtonTapped"] {
            let answer = try await client.request("POST", "/sessions/\(id)/actions", token: token, json: #"{"target":"root","action":"\#(action)"}"#)
            #expect(answer.status == 200)
            seen += answer.json["events"]?.arrayValue?.compactMap { $0["id"]?.intValue } ?? []
        }
        let before = try await client.request("GET", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")])
        let treeBefore = try await client.request("GET", "/sessions/\(id)/navigation", headers: [("Authorization", "Bearer \(token)")])

        first.process.terminate()
        #expect(await first.wait(timeout: .seconds(5)))
        #expect(first.exitStatus == 0)
        let closing = try await stream.readEventsUntilClosed()
        #expect(!closing.contains { $0.name == "end" }, "a durable session is not over when its process stops")

        let second = try Running(Self.flags, dataDirectory: directory)
        defer { second.process.terminate() }
        try second.waitUntilListening()
        #expect(second.listening["store_created"] == false, "the restart found its store")
        let after = try LoopbackClient(port: second.port)
        let restored = try await after.request("GET", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")])
        #expect(restored.status == 200, "\(restored.text)")
        #expect(restored.json == before.json, "same version and state")
        let treeAfter = try await after.request("GET", "/sessions/\(id)/navigation", headers: [("Authorization", "Bearer \(token)")])
        #expect(treeAfter.json == treeBefore.json, "same tree, same ids")
        let wrongToken = try await after.request("GET", "/sessions/\(id)", headers: [("Authorization", "Bearer not-the-token")])
        #expect(wrongToken.status == 401)

        // One more change on the new process, then a stream resuming from the first event.
        let more = try await after.request("POST", "/sessions/\(id)/actions", token: token, json: #"{"target":"root","action":"incrementButtonTapped"}"#)
        #expect(more.status == 200)
        let newIDs = more.json["events"]?.arrayValue?.compactMap { $0["id"]?.intValue } ?? []
        #expect(newIDs.allSatisfy { $0 > (seen.max() ?? 0) }, "event ids go on, never reused")
        let resumed = try LoopbackClient(port: second.port)
        let from = try #require(seen.first)
        try await resumed.send(LoopbackClient.format("GET", "/sessions/\(id)/events", headers: [
            ("Authorization", "Bearer \(token)"), ("Last-Event-ID", String(from)),
        ]))
        _ = try await resumed.readResponse()
        let last = try #require(newIDs.last)
        let replayed = try await resumed.readEvents { $0.id == last }
        #expect(replayed.compactMap(\.id) == Array(seen.dropFirst()) + newIDs, "exactly the missed events, in order")
        #expect(!replayed.contains { $0.name == "snapshot" || $0.name == "end" })
    }

    @Test func killMinusNineLosesNothingAcknowledged() async throws {
        let directory = Self.freshDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try Running(Self.flags, dataDirectory: directory)
        try first.waitUntilListening()
        var sessions: [(id: String, token: String, count: Int)] = []
        for _ in 0..<4 {
            let (id, token) = try await Self.createCounter(port: first.port)
            sessions.append((id, token, 0))
        }
        let client = try LoopbackClient(port: first.port)
        for round in 0..<20 {
            let index = round % sessions.count
            let answer = try await client.request("POST", "/sessions/\(sessions[index].id)/actions", token: sessions[index].token,
                                                  json: #"{"target":"root","action":"incrementButtonTapped"}"#)
            #expect(answer.status == 200)
            sessions[index].count += 1
        }
        kill(first.process.processIdentifier, SIGKILL)
        #expect(await first.wait(timeout: .seconds(5)))

        let second = try Running(Self.flags, dataDirectory: directory)
        defer { second.process.terminate() }
        try second.waitUntilListening()
        #expect(second.listening["store_created"] == false, "the restart found its store")
        let after = try LoopbackClient(port: second.port)
        for session in sessions {
            let state = try await after.request("GET", "/sessions/\(session.id)", headers: [("Authorization", "Bearer \(session.token)")])
            #expect(state.status == 200)
            #expect(state.json["state"]?["count"]?.intValue == session.count)
        }
        let metrics = try await after.request("GET", "/metrics", headers: [])
        #expect(metrics.text.contains("navd_sessions_recovered 4\n"))
        #expect(metrics.text.contains("navd_store_available 1\n"))
        for family in ["navd_store_commits_total", "navd_store_writes_total", "navd_store_commit_seconds_bucket{le=\"+Inf\"}", "navd_store_bytes"] {
            #expect(metrics.text.contains("\n\(family) "), "\(family)")
        }
    }

    /// SIGUSR1 writes a copy of the store while navd serves on; navd started on that copy alone
    /// has every session as it was when the copy was made, with its token.
    @Test func aBackupSignalWritesACopyThatANewNavdStartsFromWithEverySession() async throws {
        let directory = Self.freshDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try Running(Self.flags, dataDirectory: directory)
        try first.waitUntilListening()
        var sessions: [(id: String, token: String, count: Int)] = []
        let client = try LoopbackClient(port: first.port)
        for count in 1...3 {
            let (id, token) = try await Self.createCounter(port: first.port)
            for _ in 0..<count {
                let answer = try await client.request("POST", "/sessions/\(id)/actions", token: token,
                                                      json: #"{"target":"root","action":"incrementButtonTapped"}"#)
                #expect(answer.status == 200)
            }
            sessions.append((id, token, count))
        }
        kill(first.process.processIdentifier, SIGUSR1)
        let written = try first.waitForLine("backup_written")
        let path = try #require(written["path"]?.stringValue)
        #expect(path.hasPrefix(directory + "/backups/navd-") && path.hasSuffix(".sqlite3"), "\(path)")
        #expect(written["bytes"]?.intValue == (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int))
        let metrics = try await client.request("GET", "/metrics", headers: []).text
        #expect(metrics.contains("navd_store_backups_total{result=\"written\"} 1\n"))
        #expect(metrics.contains("navd_store_backups_total{result=\"failed\"} 0\n"))
        let last = metrics.split(separator: "\n").first { $0.hasPrefix("navd_store_last_backup_timestamp_seconds ") }
        let stamp = try #require(last.flatMap { Double($0.split(separator: " ")[1]) })
        #expect(abs(stamp - Date().timeIntervalSince1970) < 60)
        // Served on; a change after the copy is not in it.
        let later = try await client.request("POST", "/sessions/\(sessions[0].id)/actions", token: sessions[0].token,
                                             json: #"{"target":"root","action":"incrementButtonTapped"}"#)
        #expect(later.status == 200)
        first.process.terminate()
        #expect(await first.wait(timeout: .seconds(5)))
        // Started again on its directory, navd counts the copy it finds as the last one written.
        let again = try Running(Self.flags, dataDirectory: directory)
        try again.waitUntilListening()
        let found = try await LoopbackClient(port: again.port).request("GET", "/metrics", headers: []).text
            .split(separator: "\n").first { $0.hasPrefix("navd_store_last_backup_timestamp_seconds ") }
        let foundStamp = try #require(found.flatMap { Double($0.split(separator: " ")[1]) })
        #expect(abs(foundStamp - stamp) <= 2, "the file's time, \(foundStamp), against \(stamp) when it was written")
        again.process.terminate()
        #expect(await again.wait(timeout: .seconds(5)))

        // `navd restore` refuses a directory that holds a store, and puts the copy in place in an
        // empty one.
        for arguments in [["restore"], ["restore", path, "--bogus"], ["restore", path, path], ["restore", path, "--data-dir"]] {
            let usage = try Self.runNavd(arguments)
            #expect(usage.status == 2 && usage.errors.contains("usage:"), "\(arguments): \(usage)")
        }
        let refused = try Self.runNavd(["restore", path, "--data-dir", directory])
        #expect(refused.status == 2 && refused.errors.contains("cannot restore \(path): \(directory) holds a store already"), "\(refused)")
        let missing = try Self.runNavd(["restore", path + ".missing", "--data-dir", Self.freshDirectory()])
        #expect(missing.status == 2 && missing.errors.contains("cannot restore \(path).missing: \(path).missing: No such file or directory"),
                "\(missing)")
        let restored = Self.freshDirectory()
        defer { try? FileManager.default.removeItem(atPath: restored) }
        let restore = try Self.runNavd(["restore", path], environment: ["NAVD_DATA_DIR": restored])
        #expect(restore.status == 0, "\(restore)")
        #expect(restore.output.contains("restored \(path) as \(restored)/navd.sqlite3"), "\(restore.output)")
        let second = try Running(Self.flags, dataDirectory: restored)
        defer { second.process.terminate() }
        try second.waitUntilListening()
        #expect(second.listening["store_created"] == false)
        let after = try LoopbackClient(port: second.port)
        // Versions and ids go on from past the wall clock's mark (seconds × 10^6, plus 10^12),
        // where neither the first navd nor an earlier restore of the copy can have got, so none
        // a client saw comes again with another meaning.
        let mark = 1_000_000_000_000 + Int(Date().timeIntervalSince1970) * 1_000_000
        var versions: [Int] = []
        for session in sessions {
            let state = try await after.request("GET", "/sessions/\(session.id)", headers: [("Authorization", "Bearer \(session.token)")])
            #expect(state.status == 200)
            #expect(state.json["state"]?["count"]?.intValue == session.count)
            // Each session's snapshot moved to the mark; the changes since it follow on.
            versions.append((state.json["version"]?.intValue ?? 0) - session.count)
        }
        let base = try #require(versions.first)
        #expect(versions.allSatisfy { $0 == base } && abs(base - mark) < 120 * 1_000_000, "\(versions) against \(mark)")
        let next = try await after.request("POST", "/sessions/\(sessions[0].id)/actions", token: sessions[0].token,
                                           json: #"{"target":"root","action":"incrementButtonTapped"}"#)
        #expect(next.json["version"]?.intValue == base + sessions[0].count + 1)
        #expect(try await after.request("POST", "/sessions/\(sessions[0].id)/actions", token: sessions[0].token,
                                        json: #"{"target":"root","action":"incrementButtonTapped"}"#,
                                        headers: [("If-Match", "\"\(sessions[0].count + 1)\"")]).status == 412,
                "the version the first navd reached after the copy")
        // A client that saw the first navd's event after the copy resumes from a snapshot.
        let stream = try LoopbackClient(port: second.port)
        try await stream.send(LoopbackClient.format("GET", "/sessions/\(sessions[0].id)/events", headers: [
            ("Authorization", "Bearer \(sessions[0].token)"), ("Last-Event-ID", "2"),
        ]))
        _ = try await stream.readResponse()
        let resumed = try await stream.readEvents { _ in true }
        #expect(resumed.first?.name == "snapshot")
        #expect((resumed.first?.id ?? 0) > base)
    }

    /// Sessions that hold more than a restart's `--max-session-memory` all come back, with a
    /// warning; new ones wait until they hold less.
    @Test func aRestartUnderASmallerMemoryBudgetRecoversEverySessionAndSaysSo() async throws {
        let directory = Self.freshDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try Running(Self.flags, dataDirectory: directory)
        try first.waitUntilListening()
        #expect((first.listening["max_session_memory"]?.intValue ?? 0) > 1 << 20, "the default: a share of the machine's memory")
        #expect((first.listening["max_output_buffer"]?.intValue ?? 0) > 1 << 20, "the default: a share of the machine's memory")
        #expect(first.listening["max_input_buffer"] == first.listening["max_output_buffer"], "an eighth, as for output")
        let client = try LoopbackClient(port: first.port)
        var sessions: [(id: String, token: String)] = []
        for _ in 0..<20 {
            let created = try await client.request("POST", "/sessions", json: #"{"feature":"gallery","state":{"text":"\#(String(repeating: "x", count: 60_000))"}}"#)
            sessions.append((try #require(created.json["id"]?.stringValue), try #require(created.json["token"]?.stringValue)))
        }
        first.process.terminate()
        #expect(await first.wait(timeout: .seconds(5)))

        let second = try Running(Self.flags + ["--max-session-memory", "1048576"], dataDirectory: directory)
        let before = try second.waitUntilListening()
        #expect(second.listening["max_session_memory"] == 1_048_576)
        let warning = try #require(before.first { $0["event"] == "over_session_memory" }, "\(before)")
        #expect(warning["level"] == "warn" && warning["max_session_memory"] == 1_048_576)
        #expect((warning["bytes"]?.intValue ?? 0) > 20 * 60_000)
        let again = try LoopbackClient(port: second.port)
        for session in sessions {
            #expect(try await again.request("GET", "/sessions/\(session.id)", headers: [("Authorization", "Bearer \(session.token)")]).status == 200)
        }
        let refused = try await again.request("POST", "/sessions", json: #"{"feature":"counter"}"#)
        #expect(refused.status == 503 && refused.json["error"]?["code"] == "over_capacity")
        second.process.terminate()
        #expect(await second.wait(timeout: .seconds(5)))
    }

    @Test func aDataDirectoryThatIsNotNavdsExitsWithCode2() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("navd-foreign-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Data(repeating: 0x2A, count: 4096).write(to: URL(fileURLWithPath: directory + "/navd.sqlite3"))
        let navd = try Running(Self.flags, dataDirectory: directory)
        #expect(await navd.wait(timeout: .seconds(5)))
        #expect(navd.exitStatus == 2)
        let message = String(decoding: navd.errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(message.contains("cannot open the session store"), "\(message)")
    }

    @Test(.enabled(if: geteuid() == 0, "mounting a small tmpfs needs root"))
    func aFullDiskAnswers503RollsBackAndRecoversOnceThereIsRoom() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("navd-full-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Self.run("/bin/mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", directory)
        defer {
            try? Self.run("/bin/umount", "-l", directory)
            try? FileManager.default.removeItem(atPath: directory)
        }
        let navd = try Running(Self.flags, dataDirectory: directory)
        defer { navd.process.terminate() }
        try navd.waitUntilListening()
        let (id, token) = try await Self.createCounter(port: navd.port)
        let client = try LoopbackClient(port: navd.port)
        let filler = directory + "/filler"
        try? Self.run("/bin/dd", "if=/dev/zero", "of=\(filler)", "bs=64k", "count=200")

        let big = String(repeating: "7", count: 60_000)
        var refused: LoopbackClient.Response?
        for round in 0..<80 where refused == nil {
            // Each change writes a patch and a state event of about 60 kB.
            let answer = try await client.request("POST", "/sessions/\(id)/actions", token: token, json: #"{"target":"root","action":"incrementButtonTapped"}"#)
            if answer.status != 200 { refused = answer; break }
            let state = #"{"counter":{"count":\#(round),"destination":{"fact":{"value":"\#(round)\#(big)"}}}}"#
            let put = try await client.request("PUT", "/sessions/\(id)/state", token: token, json: state)
            if put.status >= 500 { refused = put }
        }
        let failure = try #require(refused, "the disk never filled")
        #expect(failure.status == 503)
        #expect(failure.json["error"]?["code"] == "storage_unavailable")
        #expect(failure.header("Retry-After") != nil)
        let ready = try await client.request("GET", "/readyz", headers: [])
        #expect(ready.status == 503)
        #expect(ready.json["error"]?["message"]?.stringValue?.contains("its last commit failed") == true, "\(ready.text)")
        let state = try await client.request("GET", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")])
        let version = try #require(state.json["version"]?.intValue)

        try FileManager.default.removeItem(atPath: filler)
        var readyAgain = false
        for _ in 0..<50 where !readyAgain {
            try await Task.sleep(for: .milliseconds(100))
            readyAgain = try await client.request("GET", "/readyz", headers: []).status == 200
        }
        #expect(readyAgain, "ready again by itself once the disk has room")
        let answer = try await client.request("POST", "/sessions/\(id)/actions", token: token, json: #"{"target":"root","action":"incrementButtonTapped"}"#)
        #expect(answer.status == 200)
        #expect(answer.json["version"]?.intValue == version + 1, "the refused change left nothing behind")

        // The log says why once, not once per refused request, and says when it is over.
        let lines = await navd.stopAndReadLog()
        let events = lines.compactMap { $0["event"]?.stringValue }
        let failed = try #require(lines.first { $0["event"] == "store_unavailable" }, "\(events)")
        #expect(failed["level"] == "error")
        #expect(failed["reason"]?.stringValue?.isEmpty == false)
        #expect(events.filter { $0 == "store_unavailable" }.count == 1, "\(events)")
        let failedIndex = try #require(events.firstIndex(of: "store_unavailable"))
        #expect(events[failedIndex...].contains("store_available"), "\(events)")
    }

    static func freshDirectory() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("navd-durable-\(UUID().uuidString)").path
    }

    static func createCounter(port: Int) async throws -> (String, String) {
        let created = try await LoopbackClient(port: port).request("POST", "/sessions", json: #"{"feature":"counter"}"#)
        guard created.status == 201, let id = created.json["id"]?.stringValue, let token = created.json["token"]?.stringValue else {
            throw LoopbackClient.Failure(description: "create: \(created.status) \(created.text)")
        }
        return (id, token)
    }

    /// Runs the navd binary with `arguments` to its end: its exit status and what it wrote.
    static func runNavd(_ arguments: [String], environment: [String: String] = [:]) throws -> (status: Int32, output: String, errors: String) {
        guard let navd = ProcessTests.navd else { throw LoopbackClient.Failure(description: "navd binary not built") }
        let process = Process(), output = Pipe(), errors = Pipe()
        process.executableURL = navd
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let written = output.fileHandleForReading.readDataToEndOfFile(), said = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: written, as: UTF8.self), String(decoding: said, as: UTF8.self))
    }

    static func run(_ executable: String, _ arguments: String...) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw LoopbackClient.Failure(description: "\(executable) exited \(process.terminationStatus)") }
    }
}
