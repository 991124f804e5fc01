import DemoHost
import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTP
import NavServer
import SessionStorage
import Synchronization

/// `navd`: parse the configuration, serve until SIGTERM or SIGINT, then shut down gracefully.
@main
enum Navd {
    static func main() {
        if CommandLine.arguments.dropFirst().first == "openapi" {
            exit(writeOpenAPIDocument(Array(CommandLine.arguments.dropFirst(2))))
        }
        Termination.holdSignals()
        let configuration: ServerConfiguration
        var demo = DemoSettings()
        do {
            configuration = try ServerConfiguration.parse(
                arguments: Array(CommandLine.arguments.dropFirst()),
                environment: processEnvironment(),
                settings: &demo, options: DemoSettings.options
            )
        } catch is ServerConfiguration.HelpRequested {
            print(ServerConfiguration.help(adding: DemoSettings.options))
            exit(0)
        } catch is ServerConfiguration.VersionRequested {
            print("navd \(BuildInfo.version)")
            exit(0)
        } catch {
            StandardStream.error.writeLine("navd: \(error)")
            exit(2)
        }

        if configuration.checkHealth {
            exit(HealthCheck.run(configuration) ? 0 : 1)
        }
        AllocatorTuning.restartWithLargerThreadCache()

        let storage: (any SessionStorage)?
        do {
            storage = try NavigationServer.openStorage(configuration)
        } catch {
            StandardStream.error.writeLine("navd: \(error)")
            exit(2)
        }
        let server = NavigationServer(configuration: configuration, storage: storage, features: { [demo] in DemoFeatures.catalog(demo, $0) })
        switch waitFor({ try await server.start() }) {
        case .success: break
        case .failure(let error as StorageError):
            StandardStream.error.writeLine("navd: \(error)")
            exit(2)
        case .failure(let error as HTTPServerError) where error.isUnusableSetting:
            // Not an address of this machine, or a port it may not take: a setting to fix.
            StandardStream.error.writeLine("navd: --host/--port: \(error)")
            exit(2)
        case .failure(let error):
            StandardStream.error.writeLine("navd: cannot listen on \(configuration.host):\(configuration.port): \(error)")
            exit(1)
        }
        let termination = Termination(server: server, grace: configuration.shutdownGrace) {
            server.logStopped()
        }
        server.logListening()
        // The main thread waits for the signals: the shutdown is ordinary code.
        termination.waitForSignals()
    }

    /// `navd openapi [--output FILE]`: the API document with the demo features' state schemas,
    /// made from their declarations exactly as a running navd serves it at `GET /openapi.yaml`;
    /// written to FILE (replaced whole, never left half-written) or to standard output.
    /// The committed `openapi.yaml` is this command's output, and a test keeps it so.
    private static func writeOpenAPIDocument(_ arguments: [String]) -> Int32 {
        guard arguments.isEmpty || (arguments.count == 2 && arguments[0] == "--output") else {
            StandardStream.error.writeLine("usage: navd openapi [--output FILE]")
            return 2
        }
        let server = NavigationServer(configuration: ServerConfiguration()) { DemoFeatures.catalog(DemoSettings(), $0) }
        let document = server.openAPIDocument
        guard arguments.count == 2 else {
            print(document, terminator: "")
            return 0
        }
        let path = arguments[1], temporary = path + ".tmp"
        guard let file = fopen(temporary, "w") else {
            StandardStream.error.writeLine("navd: cannot write \(temporary)")
            return 1
        }
        let written = fputs(document, file) >= 0
        guard fclose(file) == 0, written, rename(temporary, path) == 0 else {
            unlink(temporary)
            StandardStream.error.writeLine("navd: cannot write \(path)")
            return 1
        }
        return 0
    }

    /// Runs `work` to its end from the main thread, which is not one of the cooperative pool's.
    private static func waitFor(_ work: @escaping @Sendable () async throws -> Void) -> Result<Void, any Error> {
        let outcome = Mutex<Result<Void, any Error>>(.success(()))
        let done = DispatchSemaphore(value: 0)
        Task.detached {
            do { try await work() } catch { outcome.withLock { $0 = .failure(error) } }
            done.signal()
        }
        done.wait()
        return outcome.withLock { $0 }
    }

    /// `NAME=value` pairs from `environ`; a pair without `=` is skipped.
    private static func processEnvironment() -> [String: String] {
        var environment: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let pair = String(cString: pointer)
            if let equals = pair.firstIndex(of: "=") {
                environment[String(pair[..<equals])] = String(pair[pair.index(after: equals)...])
            }
            entry += 1
        }
        return environment
    }
}
