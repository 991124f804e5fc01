#if os(Linux)
import CNavdSystem
import Glibc

/// The Linux backend: one epoll instance, its event buffer and an eventfd to wake it. The
/// calls, the constants and the layout of `struct epoll_event` (packed on x86_64) all come from
/// the system headers through CNavdSystem. `wakeUp` is called from other threads; everything
/// else stays on the loop's thread (hence `@unchecked Sendable`).
final class EpollSelector: IOSelector, @unchecked Sendable {
    private let fd: Int32
    private let wakeFD: Int32
    private let capacity: Int
    private let buffer: UnsafeMutablePointer<epoll_event>

    init(capacity: Int, wakeToken: UInt64) throws(HTTPServerError) {
        let fd = navd_epoll_create1_cloexec()
        guard fd >= 0 else { throw HTTPServerError.system("epoll_create1", errno) }
        let wakeFD = navd_eventfd_nonblocking()
        guard wakeFD >= 0 else {
            let code = errno
            Glibc.close(fd)
            throw HTTPServerError.system("eventfd", code)
        }
        self.fd = fd
        self.wakeFD = wakeFD
        self.capacity = capacity
        self.buffer = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
        control(navd_epoll_ctl_add, wakeFD, events: navd_epoll_in, token: wakeToken)
    }

    func register(_ descriptor: Int32, interest: Interest, token: UInt64) {
        control(navd_epoll_ctl_add, descriptor, events: Self.events(interest), token: token)
    }

    func reregister(_ descriptor: Int32, interest: Interest, token: UInt64) {
        control(navd_epoll_ctl_mod, descriptor, events: Self.events(interest), token: token)
    }

    func deregister(_ descriptor: Int32) {
        control(navd_epoll_ctl_del, descriptor, events: 0, token: 0)
    }

    /// Closing a descriptor also takes it out of the epoll set.
    func closeWatched(_ descriptor: Int32) {
        _ = closeDescriptor(descriptor)
    }

    /// EPOLLEXCLUSIVE: a new connection wakes one of the loops, not all of them.
    func registerListener(_ descriptor: Int32, token: UInt64) {
        control(navd_epoll_ctl_add, descriptor, events: navd_epoll_in | navd_epoll_exclusive, token: token)
    }

    func wait(timeoutNanoseconds: Int64, _ ready: (_ token: UInt64, _ readiness: Readiness) -> Void) {
        let timeout = Int32(clamping: timeoutNanoseconds / 1_000_000 + 1)
        let count = navd_epoll_wait(fd, buffer, Int32(capacity), timeout)
        if count < 0 && errno != EINTR {
            // Cannot happen with a valid descriptor; never spin if it does.
            usleep(10_000)
        }
        for index in 0..<max(0, Int(count)) {
            let event = buffer + index
            ready(navd_epoll_event_token(event), Self.readiness(navd_epoll_event_events(event)))
        }
    }

    func wakeUp() {
        var one: UInt64 = 1
        _ = Glibc.write(wakeFD, &one, 8)
    }

    func acknowledgeWakeUp() {
        var counter: UInt64 = 0
        _ = Glibc.read(wakeFD, &counter, 8)
    }

    func close() {
        Glibc.close(wakeFD)
        Glibc.close(fd)
        buffer.deallocate()
    }

    static func accept(_ listenFD: Int32, _ address: UnsafeMutablePointer<sockaddr>, _ length: UnsafeMutablePointer<socklen_t>) -> Int32 {
        navd_accept4_nonblocking(listenFD, address, length)
    }

    /// Registers, changes or removes interest. A failure needs no handling: it means the
    /// descriptor is already closed, and its connection is being torn down.
    private func control(_ operation: Int32, _ descriptor: Int32, events: UInt32, token: UInt64) {
        _ = navd_epoll_ctl(fd, operation, descriptor, events, token)
    }

    /// Readable always includes EPOLLRDHUP, so a peer's close is seen while nothing is sent.
    private static func events(_ interest: Interest) -> UInt32 {
        (interest.contains(.readable) ? navd_epoll_in | navd_epoll_rdhup : 0)
            | (interest.contains(.writable) ? navd_epoll_out : 0)
    }

    private static func readiness(_ events: UInt32) -> Readiness {
        var readiness: Readiness = []
        if events & (navd_epoll_in | navd_epoll_rdhup | navd_epoll_err | navd_epoll_hup) != 0 { readiness.insert(.readable) }
        if events & navd_epoll_out != 0 { readiness.insert(.writable) }
        if events & (navd_epoll_err | navd_epoll_hup) != 0 { readiness.insert(.failed) }
        return readiness
    }
}
#endif
