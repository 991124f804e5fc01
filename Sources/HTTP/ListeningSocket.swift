#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
#if os(Linux)
import CNavdSystem
#endif

/// Creates the one non-blocking listening socket that every loop accepts from.
enum ListeningSocket {
    /// Binds and listens; returns the descriptor and the port actually bound.
    static func open(host: String, port: Int, backlog: Int) throws(HTTPServerError) -> (fd: Int32, port: Int) {
        guard (0...65535).contains(port) else { throw HTTPServerError("invalid port \(port)") }
        guard let (address, length) = address(host: host, port: port) else {
            throw HTTPServerError("cannot listen on \"\(host)\": \(HTTPServer.Configuration.hostRequirement)")
        }
        var storage = address
        #if os(Linux)
        let fd = socket(Int32(storage.ss_family), streamSocketType | Int32(SOCK_NONBLOCK.rawValue | SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw HTTPServerError.system("socket", errno) }
        #else
        // Darwin's socket(2) takes no flags: set them after.
        let fd = socket(Int32(storage.ss_family), streamSocketType, 0)
        guard fd >= 0 else { throw HTTPServerError.system("socket", errno) }
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        #endif
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        let bound = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
        }
        guard bound == 0 else {
            let code = errno
            close(fd)
            throw HTTPServerError("cannot bind \(host):\(port): \(SystemError.message(code))", code: code)
        }
        guard listen(fd, Int32(clamping: backlog)) == 0 else {
            let code = errno
            close(fd)
            throw HTTPServerError("cannot listen on \(host):\(port): \(SystemError.message(code))", code: code)
        }
        var actual = sockaddr_storage()
        var actualLength = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &actual) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &actualLength) }
        }
        let actualPort = withUnsafeBytes(of: &actual) { raw in
            // sin_port and sin6_port share the same offset.
            UInt16(bigEndian: raw.loadUnaligned(fromByteOffset: 2, as: UInt16.self))
        }
        return (fd, Int(actualPort))
    }

    /// Lets no new connection complete on `fd` while those already complete wait to be
    /// accepted: the first step of a shutdown that answers the accept queue instead of resetting
    /// it. On Linux a socket filter drops the SYNs (their clients retry, and are refused once the
    /// socket closes a moment later); elsewhere nothing happens, and connections that complete
    /// between the last accept and the close are reset.
    static func dropNewConnections(_ fd: Int32) {
        #if os(Linux)
        _ = navd_drop_new_connections(fd)
        #endif
    }

    /// Any socket address as the `sockaddr_storage` the socket calls take, with its length.
    private static func stored<Address>(_ address: Address) -> (sockaddr_storage, socklen_t) {
        var storage = sockaddr_storage()
        withUnsafeBytes(of: address) { source in
            withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: source) }
        }
        return (storage, socklen_t(MemoryLayout<Address>.size))
    }

    /// The socket address for a numeric IPv4 or IPv6 address, or "localhost"; nil for anything else.
    static func address(host: String, port: Int) -> (sockaddr_storage, socklen_t)? {
        let numericHost = host == "localhost" ? "127.0.0.1" : host
        var ipv4 = in_addr()
        var ipv6 = in6_addr()
        if inet_pton(AF_INET, numericHost, &ipv4) == 1 {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(truncatingIfNeeded: port).bigEndian
            address.sin_addr = ipv4
            return stored(address)
        }
        if inet_pton(AF_INET6, numericHost, &ipv6) == 1 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = UInt16(truncatingIfNeeded: port).bigEndian
            address.sin6_addr = ipv6
            return stored(address)
        }
        return nil
    }
}
