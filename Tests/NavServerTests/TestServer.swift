import Foundation
@testable import NavServer
import NavigationCore
import Testing
import TestSupport

/// A real navd on a loopback port, with the fact service pointed at a local stub.
final class TestServer: Sendable {
    let server: NavigationServer
    let facts: FactStub
    var port: Int { server.port }

    init(configure: (inout ServerConfiguration) -> Void = { _ in }) async throws {
        facts = try FactStub(.facts)
        var configuration = ServerConfiguration()
        configuration.port = 0
        configuration.factBaseURL = facts.baseURL
        configuration.connectDelay = .zero
        configuration.alertDismissDelay = .milliseconds(50)
        configuration.logRequests = false
        configure(&configuration)
        server = NavigationServer(configuration: configuration)
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
