#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTP

/// A blocking loopback client that speaks raw bytes, with a receive timeout so a test can
/// never hang.
final class TestClient {
    struct Response {
        var status: Int
        var headers: HTTPHeaders
        var body: [UInt8]
        var bodyText: String { String(decoding: body, as: UTF8.self) }
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    let fd: Int32
    private var buffer: [UInt8] = []

    /// - Parameter receiveBuffer: set before connecting, so the window the client offers is
    ///   small from the first byte.
    init(port: Int, timeout: Double = 5, receiveBuffer: Int32? = nil) throws {
        fd = socket(AF_INET, streamSocketType, 0)
        guard fd >= 0 else { throw Failure("socket failed") }  // deinit's close(-1) is harmless
        suppressSIGPIPE(fd)
        if let receiveBuffer { setReceiveBuffer(receiveBuffer) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        // No close here: deinit runs even when a fully initialized class throws.
        guard connected == 0 else { throw Failure("connect failed: errno \(errno)") }
        setTimeout(timeout)
    }

    deinit { closeDescriptor(fd) }

    func setTimeout(_ seconds: Double) {
        var time = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - Double(Int(seconds))) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &time, socklen_t(MemoryLayout<timeval>.size))
    }

    func setReceiveBuffer(_ bytes: Int32) {
        var size = bytes
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { sendBytes(fd, $0.baseAddress, $0.count) }
            guard sent > 0 else { throw Failure("send failed: errno \(errno)") }
            offset += sent
        }
    }

    /// Reads more bytes into the buffer; false on EOF, timeout or error.
    @discardableResult
    func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return false }
        buffer.append(contentsOf: chunk[0..<count])
        return true
    }

    /// Reads one response. `head: true` expects no body whatever Content-Length says.
    func readResponse(head: Bool = false) throws -> Response {
        var headEnd: Int?
        while headEnd == nil {
            headEnd = Self.find([13, 10, 13, 10], in: buffer)
            if headEnd == nil, !fill() { throw Failure("no complete response head; got \(text(buffer))") }
        }
        guard let end = headEnd else { throw Failure("unreachable") }
        let headText = text(Array(buffer[0..<end]))
        buffer.removeFirst(end + 4)
        var lines = headText.split(separator: "\r\n", omittingEmptySubsequences: false).map(String.init)
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ")
        guard parts.count >= 2, parts[0] == "HTTP/1.1", let status = Int(parts[1]) else {
            throw Failure("bad status line \(statusLine)")
        }
        var headers = HTTPHeaders()
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { throw Failure("bad header \(line)") }
            headers.add(String(line[..<colon]), String(line[line.index(after: colon)...]).trimmingCharacters())
        }
        var body: [UInt8] = []
        if !head && status >= 200 && status != 204 && status != 304 {
            if let lengthText = headers["Content-Length"] {
                guard let length = Int(lengthText) else { throw Failure("bad length") }
                while buffer.count < length {
                    if !fill() { throw Failure("body cut short: \(buffer.count) of \(length)") }
                }
                body = Array(buffer[0..<length])
                buffer.removeFirst(length)
            }
        }
        return Response(status: status, headers: headers, body: body)
    }

    /// Reads until `count` bytes are buffered (beyond any response already read) and takes them.
    func read(count: Int) throws -> [UInt8] {
        while buffer.count < count {
            if !fill() { throw Failure("wanted \(count) bytes, got \(buffer.count): \(text(buffer))") }
        }
        let result = Array(buffer[0..<count])
        buffer.removeFirst(count)
        return result
    }

    /// Reads until the text appears; returns everything up to and including it.
    func read(until marker: String) throws -> String {
        let needle = Array(marker.utf8)
        while true {
            if let index = Self.find(needle, in: buffer) {
                let result = Array(buffer[0..<(index + needle.count)])
                buffer.removeFirst(index + needle.count)
                return text(result)
            }
            if !fill() { throw Failure("\(marker.debugDescription) never came; got \(text(buffer))") }
        }
    }

    /// True if the server closes the connection (EOF or reset) within the timeout, with no
    /// further bytes.
    func waitForClose(timeout: Double = 3) -> Bool {
        setTimeout(timeout)
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 { return true }
            if count < 0 { return errno == ECONNRESET }
            buffer.append(contentsOf: chunk[0..<count])
        }
    }

    /// How a connection ended, as `readToEnd` saw it.
    enum Ending: Equatable {
        /// A FIN after the bytes: nothing the server sent was lost.
        case closed
        /// ECONNRESET: the kernel may have dropped bytes the server sent.
        case reset
        /// Still open when the time ran out.
        case open
    }

    /// Reads everything until the server closes (buffering it), and says how it closed.
    func readToEnd(timeout: Double = 3) -> Ending {
        setTimeout(timeout)
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = chunk.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count == 0 { return .closed }
            if count < 0 { return errno == ECONNRESET ? .reset : .open }
            buffer.append(contentsOf: chunk[0..<count])
        }
    }

    var buffered: [UInt8] { buffer }

    func shutdownWrite() { shutdownSocket(fd, Int32(SHUT_WR)) }

    private func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    static func find(_ needle: [UInt8], in haystack: [UInt8]) -> Int? {
        guard haystack.count >= needle.count else { return nil }
        for start in 0...(haystack.count - needle.count) where haystack[start] == needle[0] {
            if Array(haystack[start..<(start + needle.count)]) == needle { return start }
        }
        return nil
    }
}

extension String {
    func trimmingCharacters() -> String {
        var text = Substring(self)
        while text.first == " " { text = text.dropFirst() }
        while text.last == " " { text = text.dropLast() }
        return String(text)
    }
}
