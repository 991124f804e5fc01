import Dispatch
import Foundation
import NavServer
import Synchronization
import Todo

/// Serves the to-do feature with navd's server library: same flags as `navd`
/// (`--port`, `--store`, `--data-dir`, ...), sessions kept across restarts.
@main
enum TodoServer {
    static func main() async {
        let server: NavigationServer
        do {
            let configuration = try ServerConfiguration.parse(
                arguments: Array(CommandLine.arguments.dropFirst()),
                environment: ProcessInfo.processInfo.environment
            )
            server = NavigationServer(configuration: configuration, storage: try NavigationServer.openStorage(configuration)) { _ in
                TodoFeature.catalog()
            }
            try await server.start()
        } catch is ServerConfiguration.HelpRequested {
            print(ServerConfiguration.help)
            return
        } catch {
            FileHandle.standardError.write(Data("todo-server: \(error)\n".utf8))
            exit(2)
        }
        server.logListening()
        await terminationSignal()
        await server.shutdown(within: .seconds(4))
        server.logStopped()
    }

    /// Returns at the first SIGINT or SIGTERM.
    private static func terminationSignal() async {
        let pending = Mutex<CheckedContinuation<Void, Never>?>(nil)
        let queue = DispatchQueue(label: "todo-server.signals")
        var sources: [any DispatchSourceSignal] = []
        await withCheckedContinuation { continuation in
            pending.withLock { $0 = continuation }
            for number in [SIGINT, SIGTERM] {
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler { pending.withLock { $0.take() }?.resume() }
                source.resume()
                sources.append(source)
            }
        }
        for source in sources { source.cancel() }
    }
}
