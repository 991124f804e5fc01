import Dispatch
import Foundation
import NavServer

/// `navd`: parse the configuration, serve until SIGTERM or SIGINT, then shut down gracefully.

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

let server = NavigationServer(configuration: configuration)
do {
    try server.start()
} catch {
    FileHandle.standardError.write(Data("navd: cannot listen on \(configuration.host):\(configuration.port): \(error)\n".utf8))
    exit(1)
}
FileHandle.standardOutput.write(Data(#"{"event":"listening","host":"\#(configuration.host)","port":\#(server.port)}"#.utf8 + [0x0A]))

// Signals arrive on a queue, not in a handler: the shutdown is ordinary code.
signal(SIGTERM, SIG_IGN)
signal(SIGINT, SIG_IGN)
signal(SIGPIPE, SIG_IGN)
let signalSources = [SIGTERM, SIGINT].map { number in
    let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
    source.setEventHandler {
        Task {
            await server.shutdown(grace: .seconds(4))
            FileHandle.standardOutput.write(Data(#"{"event":"stopped"}"#.utf8 + [0x0A]))
            exit(0)
        }
    }
    source.resume()
    return source
}
withExtendedLifetime(signalSources) { dispatchMain() }
