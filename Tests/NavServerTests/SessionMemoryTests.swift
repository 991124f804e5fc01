@testable import NavServer
import NavigationCore
import Testing
import TestSupport

/// `--max-session-memory`: what all sessions may hold together. Past it no session is made and
/// none grows, and everything else goes on.
@Suite struct SessionMemoryTests {
    @Test func theSettingComesFromItsFlagOrVariableAndDefaultsToAShareOfMemory() throws {
        // The bound on what waits for clients is read and refused alike.
        let settings: [(flag: String, variable: String, value: KeyPath<ServerConfiguration, Int?>)] = [
            ("--max-session-memory", "NAVD_MAX_SESSION_MEMORY", \.maxSessionMemory),
            ("--max-output-buffer", "NAVD_MAX_OUTPUT_BUFFER", \.maxOutputBuffer),
            ("--max-input-buffer", "NAVD_MAX_INPUT_BUFFER", \.maxInputBuffer),
        ]
        for (flag, variable, value) in settings {
            #expect(try ServerConfiguration.parse(arguments: [], environment: [:])[keyPath: value] == nil)
            #expect(try ServerConfiguration.parse(arguments: [], environment: [variable: "2097152"])[keyPath: value] == 2 << 20)
            #expect(try ServerConfiguration.parse(arguments: [flag, "4194304"], environment: [:])[keyPath: value] == 4 << 20)
            for refused in ["1000", "lots", "-1", ""] {
                #expect(throws: ServerConfiguration.Invalid.self, "\(flag) \(refused)") {
                    try ServerConfiguration.parse(arguments: [flag, refused], environment: [:])
                }
            }
        }
        // A quarter of what the machine (or the control group, when it says less) has; an eighth
        // for what waits for clients.
        #expect(AvailableMemory.sessionShare == AvailableMemory.bytes / 4)
        #expect(AvailableMemory.outputShare == AvailableMemory.bytes / 8)
        #expect(AvailableMemory.bytes > 64 << 20 && AvailableMemory.bytes < 1 << 50)
        #expect(AvailableMemory.limit("max\n") == nil && AvailableMemory.limit("536870912\n") == 512 << 20)
    }

    /// The control group's limit is found where v2 and v1 keep it, for the group navd is in.
    @Test func theControlGroupsLimitIsReadForTheGroupNavdIsIn() {
        let files = [
            "/sys/fs/cgroup/memory.max": "536870912\n",
            "/sys/fs/cgroup/system.slice/navd.service/memory.max": "max\n",
            "/sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": "1073741824\n",
        ]
        func limit(_ membership: String) -> Int? {
            AvailableMemory.controlGroupLimit(membership: membership, reading: { files[$0] })
        }
        #expect(limit("0::/\n") == 512 << 20, "a container's own group (v2)")
        #expect(limit("0::/system.slice/navd.service\n") == nil, "a unit without MemoryMax=")
        #expect(limit("12:pids:/docker/abc\n4:memory:/docker/abc\n0::/\n") == 512 << 20, "v2 first")
        #expect(limit("4:cpu,memory:/docker/abc\n0::/elsewhere\n") == 1 << 30, "v1, where v2 has no file")
        #expect(limit("4:cpu:/docker/abc\n") == nil)
        #expect(AvailableMemory.controlGroupLimit(membership: nil, reading: { files[$0] }) == nil)
    }

    @Test func pastTheBudgetNoSessionIsMadeNoneGrowsAndEndingOnesMakesRoom() async throws {
        let server = try await TestServer { $0.maxSessionMemory = 1 << 20 }
        let client = try server.client()
        let text = String(repeating: "x", count: 60_000)
        var sessions: [(id: String, token: String, editor: String)] = []
        var refusal: LoopbackClient.Response?
        while refusal == nil, sessions.count < 100 {
            let created = try await client.request("POST", "/sessions", json: #"{"feature":"gallery","state":{"text":"\#(text)"}}"#)
            guard created.status == 201 else {
                refusal = created
                break
            }
            let id = try #require(created.json["id"]?.stringValue), token = try #require(created.json["token"]?.stringValue)
            let editor = try #require(created.json["navigation"]?["presentations"]?[0]?["id"]?.stringValue)
            sessions.append((id, token, editor))
        }
        // 1 MiB at about 68 KB each (the text, 5 KiB, 3 KiB for the editor): 15 fit; a 16th,
        // once made, would pass the budget, and is dropped.
        let full = try #require(refusal)
        #expect(full.status == 503 && full.json["error"]?["code"] == "over_capacity", "\(full.text)")
        #expect(full.json["error"]?["message"]?.stringValue?.contains("memory") == true)
        #expect(full.header("Retry-After") == "1")
        #expect(sessions.count == 15, "\(sessions.count) sessions")

        // Short of the budget still, a session grows past it…
        let first = try #require(sessions.first)
        let path = "/sessions/\(first.id)/features/\(first.editor)/bindings/text"
        let longer = try await client.request("PUT", path, token: first.token, json: #""\#(text)\#(String(repeating: "y", count: 3000))""#)
        #expect(longer.status == 200, "\(longer.text)")
        let metrics = try await client.request("GET", "/metrics").text
        #expect(metrics.contains("navd_session_memory_limit_bytes 1048576\n"))
        let used = metrics.split(separator: "\n").first { $0.hasPrefix("navd_session_memory_bytes ") }
            .flatMap { Int($0.split(separator: " ")[1]) }
        #expect((used ?? 0) >= 1 << 20, "\(String(describing: used))")

        // …and from then on a change that grows a session is refused, and changes nothing; one
        // that does not is made.
        let grown = try await client.request("PUT", path, token: first.token, json: #""\#(text)\#(String(repeating: "y", count: 4000))""#)
        #expect(grown.status == 503 && grown.json["error"]?["code"] == "over_capacity", "\(grown.text)")
        let unchanged = try await client.request("GET", "/sessions/\(first.id)", headers: [("Authorization", "Bearer \(first.token)")])
        #expect(unchanged.json["version"]?.intValue == 1)
        let shrunk = try await client.request("PUT", path, token: first.token, json: #""short""#)
        #expect(shrunk.status == 200, "\(shrunk.text)")
        // Reads and streams go on.
        #expect(try await client.request("GET", "/sessions/\(first.id)/navigation?wait=false", headers: [("Authorization", "Bearer \(first.token)")]).status == 200)

        // Ended sessions give their memory back: a new one is made again.
        for session in sessions.dropFirst().prefix(3) {
            #expect(try await client.request("DELETE", "/sessions/\(session.id)", headers: [("Authorization", "Bearer \(session.token)")]).status == 204)
        }
        var made = false
        for _ in 0..<50 where !made {
            // A deleted session's memory is given back once the last reference to it goes.
            made = try await client.request("POST", "/sessions", json: #"{"feature":"gallery","state":{"text":"\#(text)"}}"#).status == 201
            if !made { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(made)
        await server.stop()
    }
}
