import DemoHost
import Foundation
@testable import NavServer
import NavigationClient
import SessionStorage
import TestSupport

/// A real navd on a loopback port for the client's tests: in memory, or on an SQLite store in
/// a temporary directory so that it can be restarted on the same port and resume its sessions.
final class LoopbackNavd: Sendable {
    let server: NavigationServer
    let facts: FactStub
    let directory: String?

    var port: Int { server.port }
    var client: NavdClient { NavdClient(baseURL: URL(string: "http://127.0.0.1:\(port)")!) }

    init(durableIn directory: String? = nil, port: Int = 0, facts: FactStub? = nil, eventBuffer: Int? = nil) async throws {
        self.facts = try facts ?? FactStub(.facts)
        self.directory = directory
        var settings = DemoSettings()
        settings.factBaseURL = self.facts.baseURL
        settings.connectDelay = .zero
        settings.alertDismissDelay = .milliseconds(50)
        var configuration = ServerConfiguration()
        configuration.port = port
        configuration.logRequests = false
        if let eventBuffer { configuration.sessionLimits.eventBufferCount = eventBuffer }
        var storage: (any SessionStorage)?
        if let directory {
            configuration.store = .sqlite
            configuration.dataDirectory = directory
            storage = try NavigationServer.openStorage(configuration)
        }
        server = NavigationServer(configuration: configuration, storage: storage, logOutput: RequestLog.discarding,
                                  features: { [settings] in DemoFeatures.catalog(settings, $0) })
        try await server.start()
    }

    /// Stops this process's server and starts another on the same port and store.
    func restart() async throws -> LoopbackNavd {
        await server.shutdown(within: .seconds(1))
        return try await LoopbackNavd(durableIn: directory, port: port, facts: facts)
    }

    func stop() async {
        await server.shutdown(within: .seconds(1))
        facts.stop()
    }

    static func temporaryDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appending(path: "navd-client-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}

/// Waits (at most `seconds`) until `condition` holds, checking every 20 ms.
@MainActor func until(_ what: String, seconds: Int = 10, _ condition: @MainActor () async throws -> Bool) async throws {
    let deadline = ContinuousClock.now + .seconds(seconds)
    while ContinuousClock.now < deadline {
        if try await condition() { return }
        try await Task.sleep(for: .milliseconds(20))
    }
    // Once more: a busy pool may resume the wait after its deadline.
    if try await condition() { return }
    throw NavdError.transport("timed out waiting for \(what)")
}
