import Features
import Foundation
import HTTP
import NavigationCore
import Synchronization

/// `navd`: the features, their sessions and the HTTP API, wired together.
public final class NavigationServer: Sendable {
    public let configuration: ServerConfiguration
    private let http: HTTPServer
    private let handler: APIHandler
    private let timers: DispatchQueue

    public init(configuration: ServerConfiguration) {
        self.configuration = configuration
        let metrics = Metrics()
        let factClient = MeteredFactClient(
            base: LiveFactClient(baseURL: configuration.factBaseURL, timeout: configuration.factTimeout),
            metrics: metrics
        )
        let dependencies = FeatureDependencies(
            factClient: factClient,
            connectDelay: configuration.connectDelay,
            alertDismissDelay: configuration.alertDismissDelay
        )
        handler = APIHandler(
            catalog: FeatureSet.catalog(dependencies),
            store: SessionStore(limit: configuration.maxSessions),
            metrics: metrics,
            log: RequestLog(enabled: configuration.logRequests),
            configuration: configuration,
            lifecycle: Lifecycle()
        )
        var httpConfiguration = HTTPServer.Configuration()
        httpConfiguration.host = configuration.host
        httpConfiguration.port = configuration.port
        httpConfiguration.maxConnections = configuration.maxConnections
        httpConfiguration.headerTimeout = configuration.headerTimeout
        http = HTTPServer(configuration: httpConfiguration, handler: handler)
        timers = DispatchQueue(label: "navd.timers")
    }

    /// The port it listens on (useful with port 0).
    public var port: Int { http.port }

    public func start() throws {
        try http.start()
        scheduleHousekeeping()
        handler.lifecycle.markReady()
    }

    /// SIGTERM: stop accepting, end every session's streams with `end`, let in-flight requests
    /// finish, and return within `grace`.
    public func shutdown(grace: Duration = .seconds(4)) async {
        let deadline = ContinuousClock.now + grace
        handler.lifecycle.markShuttingDown()
        http.beginShutdown()
        for hosted in handler.store.all {
            await hosted.navigation.end(.shutdown)
            hosted.events.closeAll()
        }
        // finishShutdown blocks while connections drain: not on the cooperative pool, whose few
        // threads the in-flight requests need to finish.
        let http = http
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            Thread {
                http.finishShutdown(deadline: deadline)
                done.resume()
            }.start()
        }
        for task in housekeeping.withLock({ $0 }) { task.cancel() }
        handler.log.flush()
    }

    /// Heartbeats on every stream, idle sessions ended, the request log written out.
    private func scheduleHousekeeping() {
        let handler = handler
        let interval = configuration.heartbeatInterval
        let ttl = configuration.idleSessionTTL
        let heartbeat = Task.detached {
            // On a fixed schedule, so idle streams hear from the server at least every interval.
            var next = ContinuousClock.now + interval
            while !Task.isCancelled {
                try? await Task.sleep(until: next, tolerance: .milliseconds(50))
                next += interval
                for hosted in handler.store.all { hosted.events.sendHeartbeat() }
            }
        }
        let reaper = Task.detached {
            while !Task.isCancelled, let ttl {
                try? await Task.sleep(for: min(ttl, .seconds(15)))
                for hosted in handler.store.all where hosted.isIdle(for: ttl) {
                    if handler.store.remove(hosted.id) != nil {
                        await hosted.navigation.end(.expired)
                        handler.memory.sessionEnded()
                    }
                }
            }
        }
        let trimmer = Task.detached {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                handler.memory.returnIfSessionsEnded()
            }
        }
        housekeeping.withLock { $0 = [heartbeat, reaper, trimmer] }
        handler.log.startWriting()
    }

    private let housekeeping = Mutex<[Task<Void, Never>]>([])
}
