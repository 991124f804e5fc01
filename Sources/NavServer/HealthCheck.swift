#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTP

/// `navd --check-health`: asks the server this configuration describes for `/healthz`, with a
/// plain socket, so a container health check needs no curl in the image.
public enum HealthCheck {
    /// Nil when the server answered `/healthz` with 200 within `timeoutSeconds`; else what went
    /// wrong, for the person reading a failing container's health log.
    public static func problem(_ configuration: ServerConfiguration, timeoutSeconds: Int = 3) -> String? {
        let host = ["0.0.0.0", "::", ""].contains(configuration.host) ? "127.0.0.1" : configuration.host
        let server = "\(host):\(configuration.port)"
        func failed(_ what: String) -> String { "\(what) \(server): \(String(cString: strerror(errno)))" }
        var hints = addrinfo()
        hints.ai_socktype = streamSocketType
        var results: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(configuration.port), &hints, &results) == 0, let address = results else {
            return "cannot resolve \(server)"
        }
        defer { freeaddrinfo(results) }
        let fd = socket(address.pointee.ai_family, address.pointee.ai_socktype, address.pointee.ai_protocol)
        guard fd >= 0 else { return failed("no socket for") }
        suppressSIGPIPE(fd)
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, address.pointee.ai_addr, address.pointee.ai_addrlen) == 0 else { return failed("cannot connect to") }
        let request = "GET /healthz HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n"
        guard request.withCString({ sendBytes(fd, $0, strlen($0)) }) > 0 else { return failed("cannot send to") }
        var buffer = [UInt8](repeating: 0, count: 64)
        let count = recv(fd, &buffer, buffer.count, 0)
        guard count >= 12 else { return count < 0 ? failed("no answer within \(timeoutSeconds) s from") : "\(server) closed without an answer" }
        let status = String(decoding: buffer[0..<12], as: UTF8.self)
        return status == "HTTP/1.1 200" ? nil : "\(server) answered /healthz with \(status.dropFirst(9))"
    }
}
