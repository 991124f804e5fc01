import DemoHost
import Foundation
@testable import NavServer
import Synchronization
import NavigationCore
import SessionStorage
import Testing
import TestSupport

/// A real navd on a loopback port, with the fact service pointed at a local stub.
final class TestServer: Sendable {
    let server: NavigationServer
    let facts: FactStub
    var port: Int { server.port }

    /// - Parameters:
    ///   - log: where the server's log lines go; with one, requests are logged.
    ///   - demo: the demo features' settings (the fact service, delays), as navd's flags set them.
    ///   - storage: where sessions are kept; none by default (`--store memory`).
    init(log: LogCapture? = nil, storage: (any SessionStorage)? = nil, configure: (inout ServerConfiguration) -> Void = { _ in },
         demo: (inout DemoSettings) -> Void = { _ in }) async throws {
        facts = try FactStub(.facts)
        var settings = DemoSettings()
        settings.factBaseURL = facts.baseURL
        settings.connectDelay = .zero
        settings.alertDismissDelay = .milliseconds(50)
        demo(&settings)
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.logRequests = log != nil
        configuration.io = .underTest
        configure(&configuration)
        // The demo features wired exactly as navd wires them, through the public API.
        server = NavigationServer(configuration: configuration, storage: storage, logOutput: log?.output ?? RequestLog.discarding,
                                  features: { [settings] in DemoFeatures.catalog(settings, $0) })
        try await server.start()
    }

    func client(timeoutSeconds: Int = 10) throws -> LoopbackClient { try LoopbackClient(port: port, timeoutSeconds: timeoutSeconds) }

    /// Creates a session and returns its id and token.
    func session(_ feature: String, state: String? = nil) async throws -> (id: String, token: String) {
        let body = state.map { #"{"feature":"\#(feature)","state":\#($0)}"# } ?? #"{"feature":"\#(feature)"}"#
        let response = try await client().request("POST", "/sessions", json: body)
        guard response.status == 201, let id = response.json["id"]?.stringValue, let token = response.json["token"]?.stringValue else {
            throw LoopbackClient.Failure(description: "create \(feature): \(response.status) \(response.text)")
        }
        return (id, token)
    }

    func stop() async {
        await server.shutdown(within: .seconds(1))
        facts.stop()
    }
}

/// The lines a test server logs, parsed as they come.
final class LogCapture: Sendable {
    private let bytes = Mutex<[UInt8]>([])

    var output: RequestLog.Output {
        { [self] written, _ in
            bytes.withLock { $0 += written }
            return .init(count: written.count, isClosed: false)
        }
    }

    var text: String { String(decoding: bytes.withLock { $0 }, as: UTF8.self) }

    /// Every line so far; a line that is not a JSON object becomes `null`.
    var lines: [JSON] {
        bytes.withLock { $0 }.split(separator: 0x0A).map { (try? JSONParser.parse(Array($0))) ?? .null }
    }

    /// Waits (at most 5 s: the log is written every 200 ms) for a line `matching`; the lines are
    /// looked at once more after the wait, however late a busy test pool resumes it.
    func line(_ matching: (JSON) -> Bool) async throws -> JSON {
        var found: JSON?
        _ = await eventually { found = lines.first(where: matching); return found != nil }
        guard let found else { throw LoopbackClient.Failure(description: "no such log line in:\n\(text)") }
        return found
    }

    /// The `request` line of the request with this id.
    func request(_ id: String?) async throws -> JSON {
        try await line { $0["event"] == "request" && $0["request_id"]?.stringValue == id }
    }
}

extension LoopbackClient {
    func get(_ target: String, token: String?) async throws -> Response {
        try await request("GET", target, headers: token.map { [("Authorization", "Bearer \($0)")] } ?? [])
    }

    func act(_ id: String, token: String, _ action: String, target: String = "root", args: String = "{}", query: String = "") async throws -> Response {
        try await request("POST", "/sessions/\(id)/actions\(query)", token: token,
                    json: #"{"target":"\#(target)","action":"\#(action)","args":\#(args)}"#)
    }
}

/// The first presentation in the tree whose slot is `slot`.
func presentation(_ slot: String, in tree: JSON) -> JSON? {
    for child in tree["presentations"]?.arrayValue ?? [] {
        if child["slot"]?.stringValue == slot { return child }
        if let found = presentation(slot, in: child) { return found }
    }
    for stack in tree["stacks"]?.arrayValue ?? [] {
        for element in stack["elements"]?.arrayValue ?? [] {
            if let found = presentation(slot, in: element) { return found }
        }
    }
    return nil
}

func json(_ text: String) -> JSON { (try? JSONParser.parse(text)) ?? .null }
