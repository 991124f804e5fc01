#if os(Linux)
import CNavdSystem
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// The C library's socket calls and constants as they differ between glibc and Darwin, said once.
// The free functions carry their own names because types here have `close`, `read` and `send`
// members that hide the C ones, and the module that would qualify them is Glibc on one system
// and Darwin on the other.

/// `SOCK_STREAM` as `socket(2)` takes it (an enum on glibc, a macro on Darwin).
package let streamSocketType: Int32 = {
    #if os(Linux)
    Int32(SOCK_STREAM.rawValue)
    #else
    SOCK_STREAM
    #endif
}()

/// The flags every `send` passes: `MSG_NOSIGNAL` on Linux, so a vanished peer yields EPIPE
/// rather than SIGPIPE. Darwin has no such flag; its sockets get `SO_NOSIGPIPE` instead.
package let sendFlags: Int32 = {
    #if os(Linux)
    Int32(MSG_NOSIGNAL)
    #else
    0
    #endif
}()

/// Keeps writes to a vanished peer from raising SIGPIPE where `sendFlags` cannot (Darwin).
package func suppressSIGPIPE(_ fd: Int32) {
    #if !os(Linux)
    var one: Int32 = 1
    _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
    #endif
}

/// Whether a socket holds input not read yet (bytes, or its peer's FIN), looked at without
/// taking any.
package func hasUnreadInput(_ fd: Int32) -> Bool {
    var byte: UInt8 = 0
    return recv(fd, &byte, 1, Int32(MSG_PEEK) | Int32(MSG_DONTWAIT)) >= 0
}

/// Bytes written to a socket that its peer has not yet taken (acknowledged), where the system
/// says; nil where it does not. A client reading slowly shows as this falling, even while the
/// kernel, which signals room only once a good share of the buffer is free, reports none.
package func unacknowledgedBytes(_ fd: Int32) -> Int? {
    #if os(Linux)
    let bytes = navd_unacknowledged_bytes(fd)
    return bytes >= 0 ? Int(bytes) : nil
    #else
    var bytes: Int32 = 0
    var length = socklen_t(MemoryLayout<Int32>.size)
    return getsockopt(fd, SOL_SOCKET, SO_NWRITE, &bytes, &length) == 0 ? Int(bytes) : nil
    #endif
}

/// An identifier of the calling thread, comparable across threads (`pthread_t` is an integer
/// on glibc and a pointer on Darwin).
package func currentThreadID() -> UInt {
    #if os(Linux)
    UInt(pthread_self())
    #else
    UInt(bitPattern: pthread_self())
    #endif
}

/// Whether the calling thread runs an event loop: each loop's thread marks itself as it starts.
enum LoopThreadMark {
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    static func markCurrent() {
        pthread_setspecific(key, UnsafeRawPointer(bitPattern: 1))
    }

    static var isCurrent: Bool { pthread_getspecific(key) != nil }
}

@discardableResult
package func closeDescriptor(_ fd: Int32) -> Int32 { close(fd) }

package func readDescriptor(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    read(fd, buffer, count)
}

package func writeDescriptor(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    write(fd, buffer, count)
}

package func listenOn(_ fd: Int32, backlog: Int32) -> Int32 { listen(fd, backlog) }

@discardableResult
package func shutdownSocket(_ fd: Int32, _ how: Int32) -> Int32 { shutdown(fd, how) }

package func receive(_ fd: Int32, _ buffer: UnsafeMutableRawPointer?, _ count: Int) -> Int {
    recv(fd, buffer, count, 0)
}

/// `send(2)` with `sendFlags`.
package func sendBytes(_ fd: Int32, _ buffer: UnsafeRawPointer?, _ count: Int) -> Int {
    send(fd, buffer, count, sendFlags)
}

/// `sendmsg(2)` of `count` iovecs with `sendFlags` (`msg_iovlen` is a size_t on glibc and an
/// int on Darwin).
package func sendGathered(_ fd: Int32, _ iovecs: UnsafeMutablePointer<iovec>, count: Int) -> Int {
    var message = msghdr()
    message.msg_iov = iovecs
    #if os(Linux)
    message.msg_iovlen = count
    #else
    message.msg_iovlen = Int32(count)
    #endif
    return sendmsg(fd, &message, sendFlags)
}
