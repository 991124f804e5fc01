#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import HTTP
import NavigationCore

/// An HTTP/1.1 client on one loopback connection, for end-to-end tests that must see the bytes:
/// keep-alive, pipelining, raw and hostile requests, event streams.
///
/// Its socket calls block, so they run on the client's own serial queue, never on the
/// cooperative thread pool the server's sessions need (two threads on a two-core machine).
/// That queue also serializes every use of its state, hence the unchecked Sendable.
public final class LoopbackClient: @unchecked Sendable {
    public struct Response: Sendable {
        public let status: Int
        public let headers: [String: String]
        public let body: [UInt8]
        public var text: String { String(decoding: body, as: UTF8.self) }
        public var json: JSON { (try? JSONParser.parse(body)) ?? .null }
        public func header(_ name: String) -> String? { headers[name.lowercased()] }
    }

    public struct Event: Equatable, Sendable {
        public let id: Int?
        public let name: String
        public let data: JSON
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    private let fd: Int32
    private let queue = DispatchQueue(label: "loopback-client")
    private var buffer: [UInt8] = []
    /// Comment lines (heartbeats) skipped by `readEvents`.
    public private(set) var commentsSeen = 0

    /// - Parameter receiveBuffer: a small kernel receive buffer (set before connecting, so the
    ///   window is small from the start) makes a client that does not read fill up fast.
    public init(port: Int, timeoutSeconds: Int = 10, receiveBuffer: Int32? = nil) throws {
        fd = socket(AF_INET, streamSocketType, 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(errno)") }
        suppressSIGPIPE(fd)
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw Failure(description: "connect to \(port): \(errno)")
        }
    }

    deinit { close(fd) }

    /// The client's own port, as the server sees it.
    public var localPort: Int {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let found = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        return found == 0 ? Int(UInt16(bigEndian: address.sin_port)) : 0
    }

    private func sendNow(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { sendBytes(fd, $0.baseAddress, $0.count) }
            guard sent > 0 else { throw Failure(description: "send: \(errno)") }
            offset += sent
        }
    }

    public func send(_ bytes: [UInt8]) async throws { try await run { try $0.sendNow(bytes) } }

    public func send(_ text: String) async throws { try await send(Array(text.utf8)) }

    /// Whether the server has sent something (or closed) that no read has taken yet: a client
    /// still writing can check for an early answer without blocking on a read.
    public func hasSomethingToRead() async throws -> Bool {
        try await run { client in
            if !client.buffer.isEmpty { return true }
            var ready = pollfd(fd: client.fd, events: Int16(POLLIN), revents: 0)
            return poll(&ready, 1, 0) > 0
        }
    }

    /// Runs blocking socket work on the client's queue.
    private func run<T: Sendable>(_ body: @escaping @Sendable (LoopbackClient) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result { try body(self) }) }
        }
    }

    /// Sends a request; JSON bodies get their Content-Type unless the caller set one.
    public func request(
        _ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8]? = nil
    ) async throws -> Response {
        let bytes = Self.format(method, target, headers: headers, body: body)
        return try await run { client in
            try client.sendNow(bytes)
            return try client.readResponseNow(head: method == "HEAD")
        }
    }

    public func request(_ method: String, _ target: String, token: String? = nil, json: String, headers: [(String, String)] = []) async throws -> Response {
        var all = headers
        if let token { all.append(("Authorization", "Bearer \(token)")) }
        all.append(("Content-Type", "application/json"))
        return try await request(method, target, headers: all, body: Array(json.utf8))
    }

    public static func format(_ method: String, _ target: String, headers: [(String, String)] = [], body: [UInt8]? = nil) -> [UInt8] {
        var head = "\(method) \(target) HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body, !headers.contains(where: { $0.0.lowercased() == "transfer-encoding" }) {
            head += "Content-Length: \(body.count)\r\n"
        }
        head += "\r\n"
        return Array(head.utf8) + (body ?? [])
    }

    /// Reads one response framed by Content-Length (the server always sends one, except on streams).
    public func readResponse(head: Bool = false) async throws -> Response {
        try await run { try $0.readResponseNow(head: head) }
    }

    private func readResponseNow(head: Bool) throws -> Response {
        let headEnd = try readUntil([13, 10, 13, 10])
        let lines = String(decoding: buffer[..<headEnd], as: UTF8.self).components(separatedBy: "\r\n")
        buffer.removeFirst(headEnd + 4)
        let statusParts = lines.first?.split(separator: " ") ?? []
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else { throw Failure(description: "bad status line \(lines.first ?? "")") }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingSpaces
        }
        if status == 100 { return try readResponseNow(head: head) }
        let length = head ? 0 : Int(headers["content-length"] ?? "0") ?? 0
        while buffer.count < length { try fill() }
        let body = Array(buffer[..<length])
        buffer.removeFirst(length)
        return Response(status: status, headers: headers, body: body)
    }

    /// Reads server-sent events until `stop` says so; comments are skipped.
    public func readEvents(until stop: @escaping @Sendable (Event) -> Bool) async throws -> [Event] {
        try await run { try $0.readEventsNow(until: stop) }
    }

    private func readEventsNow(until stop: (Event) -> Bool) throws -> [Event] {
        var events: [Event] = []
        while true {
            let end = try readUntil([10, 10])
            guard let event = takeEvent(upTo: end) else { continue }
            events.append(event)
            if stop(event) { return events }
        }
    }

    /// Reads (and drops events) until `count` comment lines, heartbeats, have been seen in all.
    public func readComments(until count: Int) async throws {
        try await run { client in
            while client.commentsSeen < count {
                let end = try client.readUntil([10, 10])
                _ = client.takeEvent(upTo: end)
            }
        }
    }

    /// Every event the server sends until it closes the stream.
    public func readEventsUntilClosed() async throws -> [Event] {
        try await run { client in
            guard client.readUntilClosedNow() else { throw Failure(description: "the stream stayed open") }
            var events: [Event] = []
            while let end = client.buffer.firstRange(of: [10, 10])?.lowerBound {
                if let event = client.takeEvent(upTo: end) { events.append(event) }
            }
            return events
        }
    }

    /// Parses and removes the block before `end` (a blank line); `nil` for comments and retry.
    private func takeEvent(upTo end: Int) -> Event? {
        let block = String(decoding: buffer[..<end], as: UTF8.self)
        buffer.removeFirst(end + 2)
        var id: Int?
        var name = "message"
        var data = ""
        var isEvent = false
        for line in block.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.hasPrefix(":") { commentsSeen += 1; continue }
            if line.hasPrefix("retry:") { continue }
            if line.hasPrefix("id: ") { id = Int(line.dropFirst(4)); isEvent = true }
            if line.hasPrefix("event: ") { name = String(line.dropFirst(7)); isEvent = true }
            if line.hasPrefix("data: ") { data += line.dropFirst(6); isEvent = true }
        }
        guard isEvent else { return nil }
        return Event(id: id, name: name, data: (try? JSONParser.parse(data)) ?? .null)
    }

    /// Reads until the server closes the connection; `true` if it did within the timeout.
    public func readUntilClosed() async -> Bool {
        (try? await run { $0.readUntilClosedNow() }) ?? false
    }

    private func readUntilClosedNow() -> Bool {
        while true {
            var chunk = [UInt8](repeating: 0, count: 4096)
            let count = recv(fd, &chunk, chunk.count, 0)
            if count == 0 { return true }
            if count < 0 { return errno == ECONNRESET }
            buffer += chunk[0..<count]
        }
    }

    public var unread: [UInt8] { buffer }

    private func readUntil(_ marker: [UInt8]) throws -> Int {
        var searchFrom = 0
        while true {
            if buffer.count >= marker.count {
                var index = searchFrom
                while index + marker.count <= buffer.count {
                    if buffer[index] == marker[0], Array(buffer[index..<(index + marker.count)]) == marker { return index }
                    index += 1
                }
                searchFrom = max(0, buffer.count - marker.count + 1)
            }
            try fill()
        }
    }

    private func fill() throws {
        var chunk = [UInt8](repeating: 0, count: 16384)
        let count = recv(fd, &chunk, chunk.count, 0)
        guard count > 0 else { throw Failure(description: count == 0 ? "connection closed by server" : "recv: \(errno) (timeout?)") }
        buffer += chunk[0..<count]
    }
}

private extension Substring {
    var trimmingSpaces: String { String(drop(while: { $0 == " " })).trimmingTrailingSpaces }
}

private extension String {
    var trimmingTrailingSpaces: String {
        var result = self
        while result.last == " " { result.removeLast() }
        return result
    }
}

extension String {
    func components(separatedBy separator: String) -> [String] {
        var parts: [String] = []
        var rest = Substring(self)
        while let range = rest.range(of: separator) {
            parts.append(String(rest[..<range.lowerBound]))
            rest = rest[range.upperBound...]
        }
        parts.append(String(rest))
        return parts
    }
}
