import Glibc

/// glibc entry points that Swift's Glibc module does not import (its module map leaves out
/// `sys/epoll.h`, `sys/eventfd.h` and the GNU-only `accept4`). They are resolved by name
/// once per server so the package needs no C target.
struct LinuxSystemCalls: Sendable {
    typealias EpollCreate1 = @convention(c) (Int32) -> Int32
    typealias EpollCtl = @convention(c) (Int32, Int32, Int32, UnsafeMutableRawPointer?) -> Int32
    typealias EpollWait = @convention(c) (Int32, UnsafeMutableRawPointer?, Int32, Int32) -> Int32
    typealias EventFD = @convention(c) (UInt32, Int32) -> Int32
    typealias Accept4 = @convention(c) (
        Int32, UnsafeMutablePointer<sockaddr>?, UnsafeMutablePointer<socklen_t>?, Int32
    ) -> Int32

    let epollCreate1: EpollCreate1
    let epollCtl: EpollCtl
    let epollWait: EpollWait
    let eventFD: EventFD
    let accept4: Accept4

    /// Looks the functions up in the already loaded C library.
    static func resolve() throws(HTTPServerError) -> LinuxSystemCalls {
        guard let library = dlopen(nil, RTLD_NOW) else {
            throw HTTPServerError("cannot open the C library for epoll: dlopen failed")
        }
        func symbol<F>(_ name: String, as type: F.Type) throws(HTTPServerError) -> F {
            guard let pointer = dlsym(library, name) else {
                throw HTTPServerError("the C library has no \(name)")
            }
            return unsafeBitCast(pointer, to: type)
        }
        return LinuxSystemCalls(
            epollCreate1: try symbol("epoll_create1", as: EpollCreate1.self),
            epollCtl: try symbol("epoll_ctl", as: EpollCtl.self),
            epollWait: try symbol("epoll_wait", as: EpollWait.self),
            eventFD: try symbol("eventfd", as: EventFD.self),
            accept4: try symbol("accept4", as: Accept4.self)
        )
    }
}

/// Constants of `sys/epoll.h` and `sys/eventfd.h` (the same on every Linux architecture).
enum EpollFlag {
    static let readable: UInt32 = 0x001
    static let writable: UInt32 = 0x004
    static let error: UInt32 = 0x008
    static let hangUp: UInt32 = 0x010
    static let readHangUp: UInt32 = 0x2000
    static let exclusive: UInt32 = 1 << 28

    static let add: Int32 = 1
    static let delete: Int32 = 2
    static let modify: Int32 = 3

    static let closeOnExec: Int32 = 0o2_000_000
    static let eventNonBlocking: Int32 = 0o4_000
}
