import Dispatch
import HTTP
import NavigationCore
import PostgresStorage
// The server's public API names the store's types (`SessionStorage`, `StorageError`): a host
// imports NavServer alone.
@_exported import SessionStorage
import SQLiteStorage
import Synchronization

/// A navigation-state server: the features its caller hands it, their sessions and the HTTP
/// API, wired together. Build one from a catalog and a configuration, `start()` it, and
/// `shutdown(within:)` when done; `navd` is nothing more than that around the demo features.
public final class NavigationServer: Sendable {
    /// What it was built with.
    public let configuration: ServerConfiguration
    private let http: HTTPServer
    private let handler: APIHandler
    private let timers: DispatchQueue

    /// - Parameters:
    ///   - storage: where sessions are kept between processes; `nil` keeps them in memory
    ///     only, and a shutdown ends them. `openStorage(_:)` opens the one `configuration` names.
    ///   - features: builds the features sessions can be started with, once, given the
    ///     configuration and the server's metrics.
    public convenience init(configuration: ServerConfiguration, storage: (any SessionStorage)? = nil,
                            features: (FeatureServices) -> FeatureCatalog) {
        self.init(configuration: configuration, storage: storage, logOutput: RequestLog.standardOutput, features: features)
    }

    /// - Parameter logOutput: where log lines go (stdout; a test's buffer).
    init(configuration: ServerConfiguration, storage: (any SessionStorage)?, logOutput: @escaping RequestLog.Output,
         features: (FeatureServices) -> FeatureCatalog) {
        // Every session this server hosts shares one budget, unless the embedder gave one.
        var configuration = configuration
        if configuration.sessionLimits.memory == nil {
            configuration.sessionLimits.memory = MemoryBudget(limit: configuration.maxSessionMemory ?? AvailableMemory.sessionShare)
        }
        configuration.maxOutputBuffer = configuration.maxOutputBuffer ?? AvailableMemory.outputShare
        configuration.maxInputBuffer = configuration.maxInputBuffer ?? AvailableMemory.outputShare
        self.configuration = configuration
        let metrics = Metrics()
        handler = APIHandler(
            catalog: features(FeatureServices(configuration: configuration, metrics: metrics)),
            store: SessionStore(limit: configuration.maxSessions, memory: configuration.sessionLimits.memory),
            metrics: metrics,
            log: RequestLog(enabled: configuration.logRequests, output: logOutput),
            configuration: configuration,
            lifecycle: Lifecycle(),
            persistence: SessionPersistence(storage: storage)
        )
        var httpConfiguration = HTTPServer.Configuration()
        httpConfiguration.host = configuration.host
        httpConfiguration.port = configuration.port
        httpConfiguration.maxConnections = configuration.maxConnections
        httpConfiguration.maxBufferedOutput = configuration.maxOutputBuffer
        httpConfiguration.maxBufferedBodies = configuration.maxInputBuffer
        httpConfiguration.headerTimeout = configuration.headerTimeout
        httpConfiguration.backend = configuration.io
        http = HTTPServer(configuration: httpConfiguration, handler: handler)
        timers = DispatchQueue(label: "navd.timers")
    }

    /// Opens the store `configuration` names: `nil` for `--store memory`.
    public static func openStorage(_ configuration: ServerConfiguration) throws(StorageError) -> (any SessionStorage)? {
        switch configuration.store {
        case .memory:
            return nil
        case .sqlite:
            let limits = configuration.sessionLimits
            return try SQLiteSessionStore(directory: configuration.dataDirectory,
                                          retention: .init(count: limits.eventBufferCount, bytes: limits.eventBufferBytes),
                                          completionRound: { LoopExecutor.gathering($0) })
        case .postgres:
            guard let url = configuration.databaseURL else { throw .cannotOpen("--store postgres needs --database-url or DATABASE_URL") }
            let limits = configuration.sessionLimits
            return try PostgresSessionStore(url: url, retention: .init(count: limits.eventBufferCount, bytes: limits.eventBufferBytes),
                                            completionRound: { LoopExecutor.gathering($0) })
        }
    }

    /// `GET /openapi.yaml`: the API with the hosted features' state schemas.
    public var openAPIDocument: String {
        handler.assets["/openapi.yaml"].map { String(decoding: $0.bytes, as: UTF8.self) } ?? ""
    }

    /// The port it listens on (useful with port 0).
    public var port: Int { http.port }

    /// Bytes of request bodies arriving or waiting for their answers (`--max-input-buffer`).
    var bufferedBodyBytes: Int { http.bufferedBodyBytes }

    /// The `listening` log line, with the address and port (the one port 0 picked), the
    /// version of what serves (the configuration's `serverVersion`, navd's own by default) and
    /// where sessions are kept: a start on a store it had to make (a first start, or a volume
    /// that was not mounted) shows as one.
    public func logListening() {
        let version = configuration.serverVersion
        var fields: [(String, JSON)] = [("version", .string(version)), ("host", .string(configuration.host)), ("port", .int(port)),
                                        ("io", .string(configuration.io.rawValue)), ("allowed_hosts", .string(configuration.hostPolicy.description)),
                                        ("max_session_memory", .int(configuration.sessionLimits.memory?.limit ?? 0)),
                                        ("max_output_buffer", .int(configuration.maxOutputBuffer ?? 0)),
                                        ("max_input_buffer", .int(configuration.maxInputBuffer ?? 0))]
        switch handler.persistence.storage {
        case nil: fields.append(("store", "memory"))
        case let sqlite as SQLiteSessionStore:
            fields += [("store", "sqlite"), ("store_path", .string(sqlite.path)), ("store_created", .bool(sqlite.wasCreated))]
        case is PostgresSessionStore: fields.append(("store", "postgres"))
        default: fields.append(("store", "custom"))
        }
        handler.log.note(.info, "listening", fields)
    }

    /// The `stopping` log line: a stop began, and how long the server serves on out of rotation
    /// before it drains.
    public func logStopping(signal: String, grace: Duration) {
        handler.log.note(.info, "stopping", [("signal", .string(signal)), ("grace_seconds", .int(Int(grace.components.seconds)))])
    }

    /// Writes a copy of the store to `--backup-dir` (SIGUSR1 asks for one), a piece at a time
    /// between commits, and logs what came of it: `backup_written` with the file, which is whole
    /// (an operator may copy it anywhere, and restores it as `navd.sqlite3` in an empty data
    /// directory), or `backup_failed`; `backup_skipped` while a copy is under way already. A
    /// store without copies of its own says so instead (`backup_unsupported`): memory keeps
    /// nothing, and a PostgreSQL database is backed up with PostgreSQL's tools.
    public func backUp() {
        let log = handler.log
        let started = ContinuousClock.now
        let request = handler.persistence.backUp(into: backupDirectory) { result in
            let seconds = (ContinuousClock.now - started) / .milliseconds(1) / 1000
            switch result {
            case .success(let backup):
                log.note(.info, "backup_written", [("path", .string(backup.path)), ("bytes", .int(backup.bytes)), ("seconds", .double(seconds))])
            case .failure(.unavailable(let reason)):
                log.note(.error, "backup_failed", [("reason", .string(reason))])
            case .failure(let error):
                log.note(.error, "backup_failed", [("reason", .string(error.description))])
            }
        }
        switch request {
        case .started:
            break
        case .alreadyUnderWay:
            log.note(.warn, "backup_skipped", [("reason", "a copy is under way already")])
        case .unsupported:
            let store = handler.persistence.storage == nil ? "memory" : configuration.store.rawValue
            log.note(.warn, "backup_unsupported", [("store", .string(store))])
        }
    }

    /// `--backup-dir`, or `backups` in the data directory.
    private var backupDirectory: String {
        configuration.backupDirectory
            ?? (configuration.dataDirectory.hasSuffix("/") ? configuration.dataDirectory : configuration.dataDirectory + "/") + "backups"
    }

    /// The `stopped` log line, after `shutdown()` has written out every line before it.
    public func logStopped() {
        handler.log.note(.info, "stopped")
    }

    /// Brings back the stored sessions, then starts listening. A store that cannot be read
    /// throws `StorageError`: never start silently empty. On a store several nodes share,
    /// nothing is loaded at start: each session is claimed by the node its requests reach.
    public func start() async throws {
        let log = handler.log
        handler.persistence.onHealthChange { change in
            switch change {
            case .failing(let reason): log.note(.error, "store_unavailable", [("reason", .string(reason))])
            case .stalled(let running): log.note(.error, "store_stalled", [("seconds", .int(Int(running / .seconds(1))))])
            case .recovered: log.note(.info, "store_available")
            }
        }
        if let shared = handler.persistence.shared {
            let handler = handler
            handler.persistence.onLost { handler.release($0, olderThan: $1) }
            handler.persistence.onUnsettled { handler.letGoUnsettled($0, epoch: $1) }
            // Claims in flight count as held: what they missed is checked once they hold the
            // session. Read first: a claim that finishes meanwhile is then in one list or the other.
            shared.onTakeover(held: { handler.claims.ids + handler.store.all.filter(\.isStored).map(\.id) }) {
                handler.release($0, olderThan: $1)
            }
        } else {
            try await recoverSessions()
        }
        handler.persistence.noteEarlierBackups(in: backupDirectory)
        try http.start()
        scheduleHousekeeping()
        handler.lifecycle.markReady()
    }

    private func recoverSessions() async throws {
        let handler = handler
        let sessions = try handler.persistence.recover(
            catalog: handler.catalog, limits: configuration.sessionLimits, metrics: handler.metrics, executors: http.executors
        ) { id, reason in
            handler.log.note(.warn, "session_unreadable", [("session", .string(id)), ("reason", .string(reason))])
        }
        handler.store.insert(recovered: sessions)
        // Streams attach as soon as listening starts; the sessions must publish by then. Each
        // executor's sessions are wired in one piece of work on it, all executors at once: a
        // hop per session would cost more than the wiring.
        var shares: [ObjectIdentifier: (executor: any SessionExecutor, sessions: [HostedSession])] = [:]
        for hosted in sessions {
            shares[ObjectIdentifier(hosted.navigation.executor), default: (hosted.navigation.executor, [])].sessions.append(hosted)
        }
        await withTaskGroup(of: Void.self) { group in
            for (executor, share) in shares.values {
                group.addTask {
                    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                        executor.execute {
                            for hosted in share {
                                hosted.navigation.assumeIsolated { session in
                                    APIHandler.attachEvents(hosted, to: session)
                                    // Effects in flight at the crash died with it; their features settle as if cancelled.
                                    _ = try? session.settleEffects()
                                }
                            }
                            done.resume()
                        }
                    }
                }
            }
        }
        if !sessions.isEmpty {
            handler.log.note(.info, "recovered", [("sessions", .int(sessions.count))])
            if let limit = handler.store.limit, sessions.count > limit {
                handler.log.note(.warn, "over_max_sessions", [
                    ("sessions", .int(sessions.count)), ("max_sessions", .int(limit)),
                    ("effect", .string("every session recovered; new ones are refused until fewer are live")),
                ])
            }
            if let memory = handler.store.memory, memory.isSpent {
                handler.log.note(.warn, "over_session_memory", [
                    ("bytes", .int(memory.bytesInUse)), ("max_session_memory", .int(memory.limit)),
                    ("effect", .string("every session recovered; new ones are refused, and sessions grow by small steps at most, until they hold less")),
                ])
            }
            // The records read at start are garbage now: give their memory back at once.
            handler.memory.sessionEnded()
            handler.memory.returnIfSessionsEnded()
        }
    }

    /// The first part of a graceful shutdown with a grace period: `/readyz` answers 503 so load
    /// balancers take the server out of rotation, while requests and streams are still served.
    public func leaveRotation() {
        handler.lifecycle.markLeaving()
    }

    /// Stops accepting, lets in-flight requests finish and returns at `deadline` whatever the
    /// load, or a moment after it when requests still arriving then are answered 503
    /// (`HTTPServer.finishShutdown`) and the store is closed. Durable sessions are not over: their streams close without `end`, and clients
    /// resume on the next process. Sessions kept in memory end with `end` (`shutdown`).
    ///
    /// It blocks the calling thread, which must not be one of the cooperative pool's: that pool
    /// may be busy for a long time with work the requests already queued, and nothing here
    /// waits for it longer than its share of the time.
    public func drain(until deadline: ContinuousClock.Instant) {
        handler.lifecycle.markShuttingDown()
        http.beginShutdown()
        let durable = handler.persistence.isDurable
        let sessions = handler.store.all
        // Before the streams close: a session with one open is in use. Written at the end, each
        // with the time the drain took added.
        let idleAtStop = durable ? Dictionary(sessions.filter(\.isStored).map { ($0.id, $0.idleSeconds) }, uniquingKeysWith: max) : [:]
        let measured = ContinuousClock.now
        // Each session settles on its own executor, behind the requests queued there: all at
        // once, and only for so long. A session that is late gets its streams closed without
        // `end`, which a client treats like any lost connection.
        let settled = DispatchSemaphore(value: 0)
        Task(priority: .high) {
            await withTaskGroup(of: Void.self) { group in
                for hosted in sessions {
                    group.addTask {
                        if durable { await hosted.navigation.suspend() } else { await hosted.navigation.end(.shutdown) }
                        hosted.events.closeAll()
                    }
                }
            }
            settled.signal()
        }
        _ = settled.wait(timeout: Self.dispatchTime(min(deadline, .now + Self.settleTime)))
        for hosted in sessions { hosted.events.closeAll() }
        http.finishShutdown(deadline: deadline)
        for task in housekeeping.withLock({ $0 }) { task.cancel() }
        // How long each session had gone unused, before the store closes: the next process
        // finds each as idle as it was at the stop, not fresh.
        if handler.persistence.shared == nil, let storage = handler.persistence.storage {
            let recorded = DispatchSemaphore(value: 0)
            let since = (ContinuousClock.now - measured) / .seconds(1)
            storage.commit([.idle(seconds: idleAtStop.mapValues { $0 + since })]) { _ in recorded.signal() }
            _ = recorded.wait(timeout: Self.dispatchTime(deadline))
        }
        handler.persistence.storage?.close()
        handler.log.stopWriting()
    }

    /// `drain(until:)` from async code (tests, embedders), on a thread of its own.
    public func shutdown(within time: Duration = .seconds(4)) async {
        let deadline = ContinuousClock.now + time
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            // A serial queue's work gets a thread of its own, outside the cooperative pool.
            DispatchQueue(label: "navd.shutdown").async {
                self.drain(until: deadline)
                done.resume()
            }
        }
    }

    /// How long the sessions get to settle at shutdown before their streams are closed anyway.
    static let settleTime: Duration = .seconds(1)

    private static func dispatchTime(_ instant: ContinuousClock.Instant) -> DispatchTime {
        let (seconds, attoseconds) = max(.zero, instant - .now).components
        return .now() + .nanoseconds(Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000))
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
        // On a shared store, on a fixed schedule of its own (other nodes count on the rounds) and
        // even without a TTL: the sessions in use here are recorded as such, so other nodes'
        // sweeps leave them alone.
        let sweeper = Task.detached {
            guard handler.persistence.shared != nil else { return }
            let round = min(ttl ?? Self.sharedRound, Self.sharedRound)
            var next = ContinuousClock.now + round
            var recorded = 0
            while !Task.isCancelled {
                try? await Task.sleep(until: next, tolerance: .milliseconds(100))
                guard !Task.isCancelled else { break }
                next = max(next + round, .now)
                let deleting = recorded >= Self.recordsBeforeDeleting
                recorded = await Self.sweepSharedStore(handler, ttl: deleting ? ttl : nil, round: round) ? recorded + 1 : 0
            }
        }
        // The first round at once: sessions recovered idle for the TTL end now, not a round later.
        let reaper = Task.detached {
            while !Task.isCancelled, let ttl {
                for hosted in handler.store.all where hosted.isIdle(for: ttl) {
                    await handler.expire(hosted, idleFor: ttl)
                }
                try? await Task.sleep(for: Self.reaperRound(ttl: ttl))
            }
        }
        // Once a second: memory of ended sessions back to the system, and a commit that hangs
        // reported…
        let trimmer = Task.detached {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                handler.memory.returnIfSessionsEnded()
                handler.persistence.watchForStall()
            }
        }
        // …and, apart from it (a probe may wait on a store that does not answer), a failing
        // store probed, or a quiet shared one.
        let prober = Task.detached {
            while !Task.isCancelled {
                try? await Task.sleep(for: .seconds(1))
                await handler.persistence.probeIfNeeded()
            }
        }
        housekeeping.withLock { $0 = [heartbeat, reaper, sweeper, trimmer, prober] }
        handler.log.startWriting()
    }

    private let housekeeping = Mutex<[Task<Void, Never>]>([])

    /// How often a node records on a shared store which of its sessions are in use, at most;
    /// also the longest wait between two rounds of the idle reaper.
    static let sharedRound: Duration = .seconds(15)

    /// How often idle sessions are looked for: an eighth of the TTL, between a second and the
    /// shared store's round, so a session ends at most that long after its TTL.
    static func reaperRound(ttl: Duration) -> Duration {
        min(max(.seconds(1), ttl / 8), sharedRound)
    }

    /// Rounds a node records in a row before it deletes idle sessions: after a start, or after
    /// an outage of the database, every node's record is older than the TTL allows, sessions in
    /// use included, until each node has recorded again, which takes every node at most a
    /// round once the database answers. One round more is the margin for rounds out of phase.
    /// A node cut off from the database alone records nothing, and is taken for gone once its
    /// sessions' records pass the TTL (it cannot commit them either).
    static let recordsBeforeDeleting = 2

    /// On a shared store, sessions that no node holds expire too (their node is gone, or no
    /// request reached one since a restart): every node records the sessions used since its
    /// last record, and the store deletes what no node has used for the TTL plus two rounds (a
    /// session in use is recorded once a round, a round and the sweep's own time apart). The
    /// TTL is the cluster's: without one here, this node only records. Whether the record was
    /// made.
    private static func sweepSharedStore(_ handler: APIHandler, ttl: Duration?, round: Duration) async -> Bool {
        let used = handler.store.all.filter { $0.isStored && $0.takeUseToRecord() }
        switch await handler.persistence.sweep(inUse: used.map(\.id), idle: ttl.map { $0 + round * 2 }) {
        case .success(let expired):
            if !expired.isEmpty { handler.log.note(.info, "sessions_expired", [("count", .int(expired.count))]) }
            return true
        case .failure(let error):
            for hosted in used { hosted.keepUseToRecord() }
            handler.log.note(.warn, "sweep_failed", [("reason", .string(error.description))])
            return false
        }
    }
}
