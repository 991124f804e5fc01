import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTP
import NavigationCore
import SessionStorage
import Synchronization

/// A server's whole `main`, for navd and for a host of its own features alike: the flags and
/// environment parsed (`--help`, `--version`, `--check-health` answered, `openapi [--output
/// FILE]` writing the server's API document, and `restore FILE` putting a backup in place), the
/// store opened,
/// the server started, then served until SIGTERM, SIGINT or SIGHUP and shut down gracefully
/// (`--shutdown-grace`, then a bounded drain), SIGUSR1 meanwhile writing a copy of the store. Exit codes: 0 after a shutdown, 2 for a setting
/// to fix or a store that cannot be opened, 1 when it cannot listen.
///
/// It is one place so that every server gets the parts that are easy to get wrong: signals
/// held from the first instruction (one that comes while the server starts is not lost), the
/// shutdown on threads of its own rather than behind queued requests, glibc's allocator cache
/// sized for the event loops.
///
/// Call it first in `main`: to size that cache, a process started without
/// `glibc.malloc.tcache_count` in `GLIBC_TUNABLES` starts itself once more, in place (same
/// process id and arguments, open descriptors kept), so whatever runs before it runs twice.
public enum ServerMain {
    /// Runs a server named `program` (its executable) at `version`, hosting what `features`
    /// returns; `about` describes it in `--help`. Never returns.
    public static func run(
        program: String, version: String, about: [String] = [],
        features: @escaping @Sendable (FeatureServices) -> FeatureCatalog
    ) -> Never {
        run(program: program, version: version, about: about, settings: ServerConfiguration.NoSettings(),
            options: []) { _, services in features(services) }
    }

    /// Runs a server whose features take settings of their own: `options` are parsed into
    /// `settings` beside the server's flags (and listed in `--help`), then handed to `features`.
    public static func run<Settings: Sendable>(
        program: String, version: String, about: [String] = [],
        settings: Settings, options: [ConfigurationOption<Settings>],
        features: @escaping @Sendable (Settings, FeatureServices) -> FeatureCatalog
    ) -> Never {
        let arguments = Array(CommandLine.arguments.dropFirst())
        if arguments.first == OpenAPICommand.name {
            let described = settings
            var configuration = ServerConfiguration()
            configuration.serverName = program
            configuration.serverVersion = version
            let server = NavigationServer(configuration: configuration) { features(described, $0) }
            exit(OpenAPICommand.run(program: program, arguments: Array(arguments.dropFirst()), server: server))
        }
        if arguments.first == RestoreCommand.name {
            exit(RestoreCommand.run(program: program, arguments: Array(arguments.dropFirst()), environment: processEnvironment()))
        }
        Termination.holdSignals()
        var configuration: ServerConfiguration
        var settings = settings
        do {
            configuration = try ServerConfiguration.parse(
                arguments: arguments, environment: processEnvironment(),
                settings: &settings, options: options
            )
            configuration.serverName = program
            configuration.serverVersion = version
        } catch is ServerConfiguration.HelpRequested {
            print(ServerConfiguration.help(program: program, about: about, adding: options))
            exit(0)
        } catch is ServerConfiguration.VersionRequested {
            print("\(program) \(version)")
            exit(0)
        } catch {
            fail(program, "\(error)", code: 2)
        }
        if configuration.checkHealth {
            guard let problem = HealthCheck.problem(configuration) else { exit(0) }
            fail(program, "unhealthy: \(problem)", code: 1)
        }
        AllocatorTuning.restartWithLargerThreadCache()

        let storage: (any SessionStorage)?
        do {
            storage = try NavigationServer.openStorage(configuration)
        } catch {
            fail(program, "\(error)", code: 2)
        }
        let parsed = settings
        let server = NavigationServer(configuration: configuration, storage: storage) { features(parsed, $0) }
        switch waitFor({ try await server.start() }) {
        case .success: break
        case .failure(let error as StorageError):
            fail(program, "\(error)", code: 2)
        case .failure(let error as HTTPServerError) where error.isUnusableSetting:
            // Not an address of this machine, or a port it may not take: a setting to fix.
            fail(program, "--host/--port: \(error)", code: 2)
        case .failure(let error):
            fail(program, "cannot listen on \(configuration.host):\(configuration.port): \(error)", code: 1)
        }
        let termination = Termination(server: server, program: program, grace: configuration.shutdownGrace,
                                      stopped: { server.logStopped() }, backUp: { server.backUp() })
        server.logListening()
        // The main thread waits for the signals: the shutdown is ordinary code.
        termination.waitForSignals()
    }

    private static func fail(_ program: String, _ message: String, code: Int32) -> Never {
        StandardStream.error.writeLine("\(program): \(message)")
        exit(code)
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
