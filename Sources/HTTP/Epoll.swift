#if os(Linux)
import CNavdSystem
import Glibc

/// One epoll instance and its event buffer. The calls, the constants and the layout of
/// `struct epoll_event` (packed on x86_64) all come from the system headers via CNavdSystem.
struct Epoll {
    let fd: Int32
    let capacity: Int
    private let buffer: UnsafeMutablePointer<epoll_event>

    init(capacity: Int) throws(HTTPServerError) {
        let fd = navd_epoll_create1_cloexec()
        guard fd >= 0 else { throw HTTPServerError.system("epoll_create1", errno) }
        self.fd = fd
        self.capacity = capacity
        self.buffer = UnsafeMutablePointer<epoll_event>.allocate(capacity: capacity)
    }

    /// Registers, changes or removes interest; returns false on failure.
    @discardableResult
    func control(_ operation: Int32, _ descriptor: Int32, events: UInt32, token: UInt64) -> Bool {
        navd_epoll_ctl(fd, operation, descriptor, events, token) == 0
    }

    /// Waits for events; returns how many are ready (0 on timeout or interruption).
    func wait(timeoutMilliseconds: Int32) -> Int {
        let count = navd_epoll_wait(fd, buffer, Int32(capacity), timeoutMilliseconds)
        if count < 0 && errno != EINTR {
            // Cannot happen with a valid descriptor; never spin if it does.
            usleep(10_000)
        }
        return count > 0 ? Int(count) : 0
    }

    func event(at index: Int) -> (events: UInt32, token: UInt64) {
        let event = buffer + index
        return (navd_epoll_event_events(event), navd_epoll_event_token(event))
    }

    func close() {
        _ = closeDescriptor(fd)
        buffer.deallocate()
    }
}

/// epoll's bits and operations under the names the event loop uses.
enum EpollFlag {
    static let readable = navd_epoll_in
    static let writable = navd_epoll_out
    static let error = navd_epoll_err
    static let hangUp = navd_epoll_hup
    static let readHangUp = navd_epoll_rdhup
    static let exclusive = navd_epoll_exclusive

    static let add = navd_epoll_ctl_add
    static let delete = navd_epoll_ctl_del
    static let modify = navd_epoll_ctl_mod
}
#endif
