import Dispatch
import Foundation
import NavServer
import SessionStorage
import Synchronization

/// `navd`: parse the configuration, serve until SIGTERM or SIGINT, then shut down gracefully.
///
/// The signal handlers are `@Sendable` closures on purpose: `main` runs on the main actor, and a
/// closure inheriting that isolation would trap when a dispatch queue runs it.
@main
enum Navd {
    /// Kept for the life of the process: `dispatchMain()` never returns, so a local would be
    /// released early by the optimizer and the signals would go unanswered.
    nonisolated(unsafe) private static var signalSources: [any DispatchSourceSignal] = []

    static func main() {
        let configuration: ServerConfiguration
        do {
            configuration = try ServerConfiguration.parse(
                arguments: Array(CommandLine.arguments.dropFirst()),
                environment: ProcessInfo.processInfo.environment
            )
        } catch is ServerConfiguration.HelpRequested {
            print(ServerConfiguration.help)
            exit(0)
        } catch {
            FileHandle.standardError.write(Data("navd: \(error)\n".utf8))
            exit(2)
        }

        if configuration.checkHealth {
            exit(HealthCheck.run(configuration) ? 0 : 1)
        }

        let storage: (any SessionStorage)?
        do {
            storage = try NavigationServer.openStorage(configuration)
        } catch {
            FileHandle.standardError.write(Data("navd: \(error)\n".utf8))
            exit(2)
        }
        let server = NavigationServer(configuration: configuration, storage: storage)
        switch waitFor({ try await server.start() }) {
        case .success: break
        case .failure(let error as StorageError):
            FileHandle.standardError.write(Data("navd: \(error)\n".utf8))
            exit(2)
        case .failure(let error):
            FileHandle.standardError.write(Data("navd: cannot listen on \(configuration.host):\(configuration.port): \(error)\n".utf8))
            exit(1)
        }
        server.logListening()

        // Signals arrive on a queue, not in a handler: the shutdown is ordinary code.
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
        signal(SIGPIPE, SIG_IGN)
        signalSources = [SIGTERM, SIGINT].map { number in
            let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
            source.setEventHandler { @Sendable in
                Task {
                    await server.shutdown(grace: .seconds(4))
                    server.logStopped()
                    exit(0)
                }
            }
            source.resume()
            return source
        }
        dispatchMain()
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
}
