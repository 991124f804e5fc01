import Features
import Foundation
@testable import NavServer
import Synchronization
import NavigationCore
import Testing
import TestSupport

/// A real navd on a loopback port, with the fact service pointed at a local stub.
final class TestServer: Sendable {
    let server: NavigationServer
    let facts: FactStub
    var port: Int { server.port }

    /// - Parameter log: where the server's log lines go; with one, requests are logged.
    init(log: LogCapture? = nil, configure: (inout ServerConfiguration) -> Void = { _ in }) async throws {
        facts = try FactStub(.facts)
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.factBaseURL = facts.baseURL
        configuration.connectDelay = .zero
        configuration.alertDismissDelay = .milliseconds(50)
        configuration.logRequests = log != nil
        configure(&configuration)
        let discard: RequestLog.Output = { _ in }
        server = NavigationServer(configuration: configuration, storage: nil, logOutput: log?.output ?? discard,
                                  features: Self.demoFeatures)
        try await server.start()
    }

    /// The demo features wired as `navd` wires them (its `DemoFeatures`), through the public API.
    static func demoFeatures(_ services: FeatureServices) -> FeatureCatalog {
        let configuration = services.configuration
        let fetches = services.counter("navd_fact_fetches_total", help: "Fact service requests, by outcome.", label: "outcome")
        return FeatureSet.catalog(FeatureDependencies(
            factClient: MeteredFactClient(
                base: LimitedFactClient(
                    base: LiveFactClient(baseURL: configuration.factBaseURL, timeout: configuration.factTimeout),
                    limits: .init(total: configuration.factMaxInFlight, perSession: configuration.factMaxPerSession)
                ),
                record: fetches.increment
            ),
            connectDelay: configuration.connectDelay,
            alertDismissDelay: configuration.alertDismissDelay
        ))
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
        { [self] written in bytes.withLock { $0 += written } }
    }

    var text: String { String(decoding: bytes.withLock { $0 }, as: UTF8.self) }

    /// Every line so far; a line that is not a JSON object becomes `null`.
    var lines: [JSON] {
        bytes.withLock { $0 }.split(separator: 0x0A).map { (try? JSONParser.parse(Array($0))) ?? .null }
    }

    /// Waits (at most 5 s: the log is written every 200 ms) for a line `matching`.
    func line(_ matching: (JSON) -> Bool) async throws -> JSON {
        let deadline = ContinuousClock.now + .seconds(5)
        while ContinuousClock.now < deadline {
            if let line = lines.first(where: matching) { return line }
            try await Task.sleep(for: .milliseconds(20))
        }
        throw LoopbackClient.Failure(description: "no such log line in:\n\(text)")
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
