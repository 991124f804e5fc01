#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The readiness mechanism an event loop drives, in the spirit of swift-nio's selector: the loop
/// says what each descriptor waits for and is told what became ready, by token. Connections,
/// parsers and the stream writer never see which mechanism it is.
///
/// Readiness is level-triggered: a descriptor still ready is reported again by the next `wait`
/// (the loop's write budget relies on it). Confined to its loop's thread, except `wakeUp`, which
/// any thread may call until `close`.
protocol IOSelector: AnyObject, Sendable {
    /// Starts watching `fd`; `token` comes back with its readiness.
    func register(_ fd: Int32, interest: Interest, token: UInt64)
    /// Changes what `fd` waits for.
    func reregister(_ fd: Int32, interest: Interest, token: UInt64)
    /// Stops watching `fd`, leaving it open (the shared listener); returns once the backend no
    /// longer uses it, so it may be closed.
    func deregister(_ fd: Int32)
    /// Stops watching `fd` and closes it, once nothing of the backend's uses it any more.
    func closeWatched(_ fd: Int32)
    /// Watches the listening socket that every loop shares, waking as few loops per connection
    /// as the system allows.
    func registerListener(_ fd: Int32, token: UInt64)
    /// Waits up to `timeoutNanoseconds` (rounded up), then reports each ready descriptor.
    func wait(timeoutNanoseconds: Int64, _ ready: (_ token: UInt64, _ readiness: Readiness) -> Void)
    /// Makes the loop's `wait` report the wake token; safe from any thread until `close`.
    func wakeUp()
    /// Consumes the wake-ups reported so far, so the next `wakeUp` reports again.
    func acknowledgeWakeUp()
    /// Releases the mechanism; no call may follow, `wakeUp` included.
    func close()
    /// Accepts one connection from `listenFD` as this backend's sockets must be: non-blocking
    /// and closed on exec. Returns -1 with `errno` set, as accept(2) does.
    static func accept(_ listenFD: Int32, _ address: UnsafeMutablePointer<sockaddr>, _ length: UnsafeMutablePointer<socklen_t>) -> Int32
}

/// Which backend drives the event loops.
public enum IOBackend: String, Sendable, CaseIterable {
    /// epoll(7): Linux only, and the default there.
    case epoll
    /// Dispatch read and write sources: everywhere Dispatch runs, and the default elsewhere.
    case dispatch

    public static var platformDefault: IOBackend {
        #if os(Linux)
        .epoll
        #else
        .dispatch
        #endif
    }

    /// Whether every loop watches the listener. epoll wakes one of them per connection
    /// (EPOLLEXCLUSIVE). With Dispatch one loop does, and deals connections out to the others:
    /// libdispatch on Linux loses readiness when several sources watch one descriptor.
    var everyLoopAccepts: Bool { self == .epoll }

    /// The backends this build has.
    public static var available: [IOBackend] {
        #if os(Linux)
        [.epoll, .dispatch]
        #else
        [.dispatch]
        #endif
    }

    func makeSelector(wakeToken: UInt64) throws(HTTPServerError) -> any IOSelector {
        switch self {
        case .dispatch:
            return try DispatchSelector(capacity: 256, wakeToken: wakeToken)
        case .epoll:
            #if os(Linux)
            return try EpollSelector(capacity: 256, wakeToken: wakeToken)
            #else
            throw HTTPServerError("the epoll backend needs Linux; use dispatch")
            #endif
        }
    }
}

/// What a descriptor waits for.
struct Interest: OptionSet, Equatable {
    let rawValue: UInt8
    /// Input, or the peer closing its side.
    static let readable = Interest(rawValue: 1 << 0)
    static let writable = Interest(rawValue: 1 << 1)
}

/// What a wait reported for a descriptor.
struct Readiness: OptionSet {
    let rawValue: UInt8
    /// Input, end of input, or an error or hang-up that a read will reveal.
    static let readable = Readiness(rawValue: 1 << 0)
    static let writable = Readiness(rawValue: 1 << 1)
    /// An error or hang-up on the socket.
    static let failed = Readiness(rawValue: 1 << 2)
}
