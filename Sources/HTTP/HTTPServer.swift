#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// A non-blocking HTTP/1.1 server with server-sent-event streams, knowing nothing of the
/// application.
///
/// A fixed set of event-loop threads, one selector each (epoll on Linux), serve every
/// connection; the handler is called on them and must not block. All loops watch the one
/// listening socket (with EPOLLEXCLUSIVE) and deal accepted connections round-robin, so each connection is owned by
/// exactly one loop for its life. Input is read into a per-loop buffer and only unparsed
/// leftovers stay with a connection, so an idle connection or event stream costs well under
/// a kilobyte.
///
/// Protocol choices: lines must end in CRLF (a bare LF is a 400); a missing Host header is
/// tolerated; 204 and 304 responses carry no body and no Content-Length; every other response
/// gets Content-Length, except event streams, which are raw bytes until the connection closes.
/// Call `finishShutdown` before dropping a started server: its loops run until then.
public final class HTTPServer: Sendable {
    private enum Phase {
        case idle
        case running(shared: ServerShared, loops: [EventLoop], threads: [LoopThread])
        /// Not accepting; waiting for connections to finish.
        case draining(shared: ServerShared, loops: [EventLoop], threads: [LoopThread])
        case stopped
    }

    public let configuration: Configuration
    /// One per loop, from the start: work placed on one runs on that loop's thread while the
    /// server runs, and on a queue of its own before and after.
    public let executors: [LoopExecutor]
    private let handler: any HTTPHandler
    private let phase = Mutex(Phase.idle)
    private let boundPort = Atomic<Int>(0)
    private let counters = Mutex<ServerShared?>(nil)

    public init(configuration: Configuration, handler: any HTTPHandler) {
        self.configuration = configuration
        self.handler = handler
        executors = (0..<max(1, configuration.loopCount)).map { LoopExecutor(label: "navd.loop.\($0)") }
    }

    /// Binds and listens (SO_REUSEADDR), then starts the loops. Throws a descriptive error
    /// if the address is in use or the server was already started.
    public func start() throws {
        try phase.withLock { phase throws(HTTPServerError) in
            guard case .idle = phase else { throw HTTPServerError("the server was already started") }
            let (fd, port) = try ListeningSocket.open(
                host: configuration.host, port: configuration.port, backlog: configuration.listenBacklog)
            let loopCount = executors.count
            let shared = ServerShared(listenFD: fd, settings: LoopSettings(configuration), handler: handler, loopCount: loopCount)
            var loops: [EventLoop] = []
            var threads: [LoopThread] = []
            do throws(HTTPServerError) {
                for executor in executors {
                    loops.append(try EventLoop(
                        shared: shared, executor: executor,
                        acceptsConnections: loops.isEmpty || configuration.backend.everyLoopAccepts))
                }
                for loop in loops { loop.peers = loops }
                for loop in loops {
                    // Attached before its thread starts, so work placed there from now on waits
                    // in its inbox, behind nothing that runs elsewhere.
                    loop.executor.attach(loop)
                    threads.append(try LoopThread.start { loop.run() })
                }
            } catch {
                for loop in loops.prefix(threads.count) { loop.post(.stop) }
                for thread in threads { thread.join() }
                for loop in loops.dropFirst(threads.count) { loop.tearDown() }
                closeDescriptor(fd)
                throw error
            }
            boundPort.store(port, ordering: .releasing)
            counters.withLock { $0 = shared }
            phase = .running(shared: shared, loops: loops, threads: threads)
        }
    }

    /// The port actually bound (after `start()`).
    public var port: Int { boundPort.load(ordering: .acquiring) }

    /// Connections currently open, event streams and refused ones still draining included.
    public var openConnectionCount: Int {
        counters.withLock { shared in
            guard let shared else { return 0 }
            return shared.openConnections.load(ordering: .relaxed) + shared.refusingConnections.load(ordering: .relaxed)
        }
    }

    /// Bytes waiting for clients, as the loops counted them at their last sweeps; counted only
    /// under `maxBufferedOutput`.
    public var bufferedOutputBytes: Int {
        counters.withLock { $0?.bufferedOutput.load(ordering: .relaxed) ?? 0 }
    }

    /// Bytes of request bodies arriving or waiting for their answers, as `maxBufferedBodies`
    /// counts them; counted only under that bound.
    public var bufferedBodyBytes: Int {
        counters.withLock { $0?.bufferedBodies.load(ordering: .relaxed) ?? 0 }
    }

    /// Stops accepting (new connections are refused), closes idle keep-alive connections and
    /// lets in-flight requests finish; their connections close after the response. Event
    /// streams are left open for the application to end.
    ///
    /// Connections the kernel had completed but no loop had accepted yet are not reset: no new
    /// one may complete (on Linux), the loops accept those waiting and answer each with a
    /// refusal (503, `.shuttingDown`; its request is read and dropped before the close), and
    /// only then is the listening socket closed, so later clients are refused outright.
    public func beginShutdown() {
        phase.withLock { phase in
            guard case .running(let shared, let loops, let threads) = phase else {
                if case .idle = phase { phase = .stopped }
                return
            }
            phase = .draining(shared: shared, loops: loops, threads: threads)
            shared.stopping.store(true, ordering: .relaxed)
            // Shutting the socket down (or closing it) now would reset every connection in the
            // accept queue; the loops drain it first, and the last one closes it.
            ListeningSocket.dropNewConnections(shared.listenFD)
            for loop in loops { loop.post(.beginShutdown) }
        }
    }

    /// Blocks until every connection has closed or the deadline passes, then closes what is
    /// left (open event streams end with `.shutdown`) and stops the loops. Calls
    /// `beginShutdown()` first if needed; a stopped server cannot be started again.
    ///
    /// At the deadline, a request whose body is still arriving gets `503` (`.shuttingDown`)
    /// and up to `refusalTime` more to reach its client before the close: it never reached the
    /// handler, so its client may safely send it again. (Part of a head was refused when the
    /// drain began.) A request the handler holds is cut off without an answer, since it may
    /// have taken effect; what is left open otherwise (a stream, such a request) is not waited
    /// for again.
    public func finishShutdown(deadline: ContinuousClock.Instant) {
        beginShutdown()
        wait(until: deadline) { openConnectionCount > 0 }
        let draining = phase.withLock { phase -> (ServerShared, [EventLoop])? in
            guard case .draining(let shared, let loops, _) = phase else { return nil }
            return (shared, loops)
        }
        if openConnectionCount > 0, let (shared, loops) = draining {
            shared.loopsRefusingUnfinished.store(loops.count, ordering: .relaxed)
            for loop in loops { loop.post(.refuseUnfinished) }
            wait(until: .now + Self.refusalTime) {
                shared.loopsRefusingUnfinished.load(ordering: .acquiring) > 0 || shared.refusedAtDeadline.load(ordering: .relaxed) > 0
            }
        }
        let running = phase.withLock { phase -> (ServerShared, [EventLoop], [LoopThread])? in
            guard case .draining(let shared, let loops, let threads) = phase else { return nil }
            phase = .stopped
            return (shared, loops, threads)
        }
        guard let (shared, loops, threads) = running else { return }
        shared.halting.store(true, ordering: .relaxed)
        for loop in loops { loop.post(.stop) }
        for thread in threads { thread.join() }
        shared.closeListener()
    }

    /// How long the refusals made at the drain's deadline get to be written.
    static let refusalTime: Duration = .milliseconds(200)

    /// Polls `condition` until it no longer holds or `deadline` passes.
    private func wait(until deadline: ContinuousClock.Instant, while condition: () -> Bool) {
        while condition() && ContinuousClock.now < deadline {
            usleep(2_000)
        }
    }
}
