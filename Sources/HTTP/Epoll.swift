import Glibc

/// One epoll instance and its event buffer. `struct epoll_event` is packed on x86_64
/// (12 bytes) and naturally aligned elsewhere (16 bytes), so events are read as raw bytes.
struct Epoll {
    #if arch(x86_64) || arch(i386)
    static let eventStride = 12
    static let dataOffset = 4
    #else
    static let eventStride = 16
    static let dataOffset = 8
    #endif

    let fd: Int32
    let calls: LinuxSystemCalls
    let capacity: Int
    private let buffer: UnsafeMutableRawPointer

    init(calls: LinuxSystemCalls, capacity: Int) throws(HTTPServerError) {
        let fd = calls.epollCreate1(EpollFlag.closeOnExec)
        guard fd >= 0 else { throw HTTPServerError.system("epoll_create1", errno) }
        self.fd = fd
        self.calls = calls
        self.capacity = capacity
        self.buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity * Self.eventStride, alignment: 8)
    }

    /// Registers, changes or removes interest; returns false on failure.
    @discardableResult
    func control(_ operation: Int32, _ descriptor: Int32, events: UInt32, token: UInt64) -> Bool {
        var raw: (UInt64, UInt64) = (0, 0)
        return withUnsafeMutableBytes(of: &raw) { bytes in
            bytes.storeBytes(of: events, toByteOffset: 0, as: UInt32.self)
            bytes.storeBytes(of: token, toByteOffset: Self.dataOffset, as: UInt64.self)
            return calls.epollCtl(fd, operation, descriptor, bytes.baseAddress) == 0
        }
    }

    /// Waits for events; returns how many are ready (0 on timeout or interruption).
    func wait(timeoutMilliseconds: Int32) -> Int {
        let count = calls.epollWait(fd, buffer, Int32(capacity), timeoutMilliseconds)
        if count < 0 && errno != EINTR {
            // Cannot happen with a valid descriptor; never spin if it does.
            usleep(10_000)
        }
        return count > 0 ? Int(count) : 0
    }

    func event(at index: Int) -> (events: UInt32, token: UInt64) {
        let base = buffer + index * Self.eventStride
        return (
            base.loadUnaligned(as: UInt32.self),
            (base + Self.dataOffset).loadUnaligned(as: UInt64.self)
        )
    }

    func close() {
        _ = Glibc.close(fd)
        buffer.deallocate()
    }
}
