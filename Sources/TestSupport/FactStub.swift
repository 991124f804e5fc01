#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Features
import HTTP
import Foundation
import Synchronization

/// A fact service on a loopback port, for tests that must never reach the internet.
///
/// It answers `GET /{n}` the way the numbers API does, or fails in the way a test asks for.
public final class FactStub: Sendable {
    public enum Behavior: Sendable {
        /// `"{n} is a stub number."`
        case facts
        case status(Int)
        case emptyBody
        /// Accepts and never answers, so the client times out.
        case silent
        /// A 200 whose announced 1,000-byte body arrives one byte per `interval`: a service that
        /// never lets an idle timeout fire.
        case drip(interval: Duration)
        /// A 200 with `bytes` of body sent as fast as the client reads, its length announced in
        /// `Content-Length` or not (then the body ends when the connection closes).
        case huge(bytes: Int, announced: Bool)
        /// A 302 to `location`.
        case redirect(location: String)
    }

    public let port: Int
    public var baseURL: FactServiceURL {
        guard let url = FactServiceURL("http://127.0.0.1:\(port)") else { preconditionFailure("a loopback URL parses") }
        return url
    }
    private let listener: Int32
    private let stopped = Atomic<Bool>(false)
    private let requests = Mutex<[String]>([])
    private let sent = Atomic<Int>(0)
    private let open = Atomic<Int>(0)

    public init(_ behavior: Behavior = .facts) throws {
        let (listener, port) = try Loopback.listen()
        self.listener = listener
        self.port = port
        let thread = Thread { [self] in serve(behavior) }
        thread.start()
    }

    /// The paths requested so far.
    public var requestedPaths: [String] { requests.withLock { $0 } }

    /// Body bytes the client has taken so far (`.huge` and `.drip`).
    public var bodyBytesSent: Int { sent.load(ordering: .sequentiallyConsistent) }

    /// Connections accepted and not yet closed.
    public var openConnections: Int { open.load(ordering: .sequentiallyConsistent) }

    public func stop() {
        guard !stopped.exchange(true, ordering: .sequentiallyConsistent) else { return }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    deinit { stop() }

    private func serve(_ behavior: Behavior) {
        Loopback.serveEach(listener, while: { [self] in !stopped.load(ordering: .sequentiallyConsistent) }) { [self] client in
            open.add(1, ordering: .sequentiallyConsistent)
            answer(client, behavior)
            open.subtract(1, ordering: .sequentiallyConsistent)
        }
    }

    private func answer(_ client: Int32, _ behavior: Behavior) {
        let path = Loopback.readRequestPath(client)
        requests.withLock { $0.append(path) }
        switch behavior {
        case .facts:
            let number = path.dropFirst()
            Loopback.send(client, Loopback.response(200, "\(number) is a stub number."))
        case .status(let status):
            Loopback.send(client, Loopback.response(status, "stub failure"))
        case .emptyBody:
            Loopback.send(client, Loopback.response(200, ""))
        case .silent:
            Thread.sleep(forTimeInterval: 5)
        case .drip(let interval):
            guard Loopback.send(client, "HTTP/1.1 200 Stub\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n") else { return }
            for _ in 0..<1000 {
                Thread.sleep(forTimeInterval: Double(interval.components.seconds) + Double(interval.components.attoseconds) / 1e18)
                guard Loopback.send(client, "x") else { return }
                sent.add(1, ordering: .sequentiallyConsistent)
            }
        case .huge(let bytes, let announced):
            let length = announced ? "Content-Length: \(bytes)\r\n" : ""
            guard Loopback.send(client, "HTTP/1.1 200 Stub\r\nContent-Type: text/plain\r\n\(length)Connection: close\r\n\r\n") else { return }
            let chunk = String(repeating: "7", count: 16 * 1024)
            var remaining = bytes
            while remaining > 0 {
                let piece = remaining >= chunk.utf8.count ? chunk : String(chunk.prefix(remaining))
                guard Loopback.send(client, piece) else { return }
                sent.add(piece.utf8.count, ordering: .sequentiallyConsistent)
                remaining -= piece.utf8.count
            }
        case .redirect(let location):
            Loopback.send(client, "HTTP/1.1 302 Found\r\nLocation: \(location)\r\nContent-Type: text/plain\r\nContent-Length: 5\r\nConnection: close\r\n\r\nmoved")
        }
    }
}

/// Small loopback socket helpers for test stubs.
public enum Loopback {
    public struct SocketError: Error, CustomStringConvertible {
        public let description: String
    }

    /// Accepts on `listener` until it is closed (or `proceed` says no), and runs `handle` on a
    /// thread of its own for each connection, so one slow answer holds up no other request;
    /// the connection is closed once `handle` returns. Returns when the listener is closed.
    public static func serveEach(_ listener: Int32, while proceed: () -> Bool = { true },
                                 _ handle: @escaping @Sendable (Int32) -> Void) {
        while proceed() {
            let connection = accept(listener, nil, nil)
            guard connection >= 0 else { return }
            suppressSIGPIPE(connection)
            Thread {
                handle(connection)
                close(connection)
            }.start()
        }
    }

    /// A listening socket on 127.0.0.1 with an ephemeral port.
    public static func listen() throws -> (Int32, Int) {
        let (fd, port) = try boundSocket()
        guard listenOn(fd, backlog: 64) == 0 else {
            close(fd)
            throw SocketError(description: "listen: \(errno)")
        }
        return (fd, port)
    }

    /// A socket bound to an ephemeral port on 127.0.0.1, and its port.
    private static func boundSocket() throws -> (Int32, Int) {
        let fd = socket(AF_INET, streamSocketType, 0)
        guard fd >= 0 else { throw SocketError(description: "socket: \(errno)") }
        suppressSIGPIPE(fd)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let named = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard bound == 0, named == 0 else {
            close(fd)
            throw SocketError(description: "bind: \(errno)")
        }
        return (fd, Int(UInt16(bigEndian: address.sin_port)))
    }

    /// A port that refuses connections for as long as this lives: bound on 127.0.0.1 and never
    /// listened on. (A port merely closed again could be handed at once to a server that a test
    /// running beside starts, which would then answer.)
    public final class RefusingPort: Sendable {
        public let port: Int
        private let fd: Int32

        public init() throws {
            (fd, port) = try Loopback.boundSocket()
        }

        deinit { close(fd) }
    }

    static func readRequestPath(_ fd: Int32) -> String {
        path(ofHead: readRequestHead(fd))
    }

    /// The request's head as text, up to its blank line.
    static func readRequestHead(_ fd: Int32) -> String {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !received.contains(sequence: [13, 10, 13, 10]) {
            let count = recv(fd, &buffer, buffer.count, 0)
            guard count > 0 else { break }
            received += buffer[0..<count]
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// The target of a request head's first line.
    static func path(ofHead head: String) -> String {
        // "\r\n" is one Character: the line ends where it starts.
        let parts = head.prefix { $0 != "\r\n" }.split(separator: " ")
        return parts.count > 1 ? String(parts[1]) : "/"
    }

    /// Sends all of `text`; `false` once the peer has gone.
    @discardableResult
    static func send(_ fd: Int32, _ text: String) -> Bool {
        var bytes = Array(text.utf8)[...]
        while !bytes.isEmpty {
            let count = bytes.withUnsafeBytes { sendBytes(fd, $0.baseAddress, $0.count) }
            guard count > 0 else { return false }
            bytes = bytes.dropFirst(count)
        }
        return true
    }

    static func response(_ status: Int, _ body: String) -> String {
        "HTTP/1.1 \(status) Stub\r\nContent-Type: text/plain\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)"
    }
}

private extension Array where Element == UInt8 {
    func contains(sequence: [UInt8]) -> Bool {
        guard count >= sequence.count else { return false }
        return (0...(count - sequence.count)).contains { Array(self[$0..<($0 + sequence.count)]) == sequence }
    }
}
