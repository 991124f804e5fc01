import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// What SIGTERM, SIGINT and SIGHUP do: leave rotation for the grace period (a second signal
/// cuts it short), then drain and exit, within `drainTime` of the drain's start whatever the
/// load. SIGHUP is a stop like the others, not a reload: it is what a closing terminal or
/// session manager sends, and navd reads its settings only at start. Started with SIGHUP
/// ignored (`nohup`), navd keeps ignoring it: whoever started it so asked it to outlive the
/// terminal. SIGUSR1 is no stop: it asks for a copy of the store (`backUp`), as often as sent.
///
/// All of it runs on threads of its own, never on the cooperative pool: requests may have
/// queued seconds of work there, and a shutdown waiting its turn behind them is what made
/// SIGTERM under load take half a minute. Should anything still hang (a disk that does not
/// answer), a watchdog ends the process at `hardLimit`, with exit code 1.
final class Termination: Sendable {
    /// In-flight requests get this long to finish once the drain begins.
    static let drainTime: Duration = .milliseconds(3500)
    /// Past this, counted from the start of the drain, the process exits regardless.
    static let hardLimit: Duration = .milliseconds(4500)

    private let server: NavigationServer
    private let program: String
    private let grace: Duration
    private let stopped: @Sendable () -> Void
    private let backUp: @Sendable () -> Void
    private let signalsSeen = Atomic<Int>(0)
    /// Signalled by every signal after the first: the grace period ends at once.
    private let hurry = DispatchSemaphore(value: 0)

    /// - Parameters:
    ///   - program: names the process in what it writes to standard error.
    ///   - stopped: says the server stopped, just before the process exits 0.
    ///   - backUp: what SIGUSR1 does.
    init(server: NavigationServer, program: String, grace: Duration, stopped: @escaping @Sendable () -> Void,
         backUp: @escaping @Sendable () -> Void) {
        self.server = server
        self.program = program
        self.grace = grace
        self.stopped = stopped
        self.backUp = backUp
    }

    /// Blocks the handled signals in the calling thread and every thread started after it. Call
    /// it first thing in `main`: a signal that comes while the server starts then waits for
    /// `start()` instead of killing the process or being lost.
    static func holdSignals() {
        var set = handled
        pthread_sigmask(SIG_BLOCK, &set, nil)
        signal(SIGPIPE, SIG_IGN)
    }

    /// Takes the held signals for the rest of the process; never returns. It runs on the main
    /// thread in place of `dispatchMain()`, which would wait with every signal unblocked and
    /// let SIGTERM kill the process outright.
    func waitForSignals() -> Never {
        var set = Self.handled
        var number: Int32 = 0
        while true {
            if sigwait(&set, &number) == 0 { received(number) }
        }
    }

    private static var handled: sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        if !hangUpIgnoredAtStart { sigaddset(&set, SIGHUP) }
        sigaddset(&set, SIGUSR1)
        return set
    }

    /// Whether the process started with SIGHUP ignored; asked once, before navd changes anything.
    private static let hangUpIgnoredAtStart: Bool = {
        var current = sigaction()
        guard sigaction(SIGHUP, nil, &current) == 0 else { return false }
        #if canImport(Glibc)
        let handler = current.__sigaction_handler.sa_handler
        #else
        let handler = current.__sigaction_u.__sa_handler
        #endif
        return handler.map { unsafeBitCast($0, to: Int.self) } == unsafeBitCast(SIG_IGN, to: Int.self)
    }()

    private func received(_ signal: Int32) {
        if signal == SIGUSR1 { return backUp() }
        if signalsSeen.add(1, ordering: .relaxed).newValue == 1 {
            server.logStopping(signal: Self.name(of: signal), grace: grace)
            // A serial queue's work gets a thread of its own, outside the cooperative pool.
            DispatchQueue(label: "navd.termination").async { self.run() }
        } else {
            hurry.signal()
        }
    }

    private func run() {
        if grace > .zero {
            server.leaveRotation()
            _ = hurry.wait(timeout: .now() + .nanoseconds(Self.nanoseconds(grace)))
        }
        let drainStart = ContinuousClock.now
        DispatchQueue(label: "navd.watchdog").async {
            var request = timespec(tv_sec: Self.nanoseconds(Self.hardLimit) / 1_000_000_000,
                                   tv_nsec: Self.nanoseconds(Self.hardLimit) % 1_000_000_000)
            var remaining = timespec()
            while nanosleep(&request, &remaining) != 0, errno == EINTR { request = remaining }
            StandardStream.error.writeLine("\(self.program): shutdown did not finish in time; exiting anyway", within: .milliseconds(200))
            _exit(1)
        }
        server.drain(until: drainStart + Self.drainTime)
        stopped()
        exit(0)
    }

    private static func name(of signal: Int32) -> String {
        switch signal {
        case SIGTERM: "SIGTERM"
        case SIGINT: "SIGINT"
        case SIGHUP: "SIGHUP"
        default: "signal \(signal)"
        }
    }

    private static func nanoseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        return Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
    }
}
