#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import HTTP
import Synchronization

/// A loopback relay between libpq and a PostgreSQL server that fails the way networks and
/// servers do at moments a test cannot reach from either end: a connection cut at a
/// transaction's `COMMIT`, a reply that never comes, a server that stops answering while its
/// kernel still takes the traffic. Everything else passes through untouched (libpq's simple
/// query for `COMMIT` is recognised by its bytes).
public final class PostgresFaultProxy: Sendable {
    /// Where the next `COMMIT` is cut.
    public enum Cut: Sendable {
        /// The server never receives it: nothing is committed, and the client's connection is lost.
        case beforeTheServer
        /// The server receives it and commits, and its reply never reaches the client.
        case afterTheServer
        /// The server receives it and commits, and the connection stays open, but nothing the
        /// server sends reaches the client any more: a reply lost without the connection.
        case replyHeld
    }

    public let port: Int
    private let listener: Int32
    private let target: Int
    private let armed = Mutex<Cut?>(nil)
    private let cuts = Atomic<Int>(0)
    private let refusing = Atomic<Bool>(false)
    private let stalled = Atomic<Bool>(false)

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// Listens on a free loopback port and relays each connection to `targetPort` on loopback.
    public init(to targetPort: Int) throws {
        target = targetPort
        let listener = try Self.makeSocket()
        var address = Self.loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let listening = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { address in
                bind(listener, address, length) == 0 && getsockname(listener, address, &length) == 0 && listen(listener, 64) == 0
            }
        }
        guard listening else {
            close(listener)
            throw Failure(description: "bind or listen: errno \(errno)")
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else {
                    if errno == EINTR || errno == ECONNABORTED { continue }
                    return
                }
                if refusing.load(ordering: .relaxed) {
                    close(client)
                } else {
                    relay(client)
                }
            }
        }
    }

    /// Cuts the next `COMMIT` any relayed connection sends, as `cut` says.
    public func arm(_ cut: Cut) {
        armed.withLock { $0 = cut }
    }

    /// While `refuse` holds, each new connection is closed at once, as by a server that cannot
    /// be reached; connections already relayed go on.
    public func refuseConnections(_ refuse: Bool) {
        refusing.store(refuse, ordering: .relaxed)
    }

    /// While `stall` holds, nothing is relayed either way on any connection, new ones included:
    /// the server seems stopped (`SIGSTOP`, a disk that hangs under it) while the kernel still
    /// accepts and acknowledges the traffic, so no TCP timeout fires. What was held is relayed
    /// once the stall ends, as a server that resumes reads what waited.
    public func stall(_ stall: Bool) {
        stalled.store(stall, ordering: .relaxed)
    }

    private func waitWhileStalled() {
        while stalled.load(ordering: .relaxed) { usleep(5_000) }
    }

    /// How many `COMMIT`s were cut so far.
    public var cutCount: Int { cuts.load(ordering: .relaxed) }

    /// The URL of `database` through the relay.
    public func url(database: String, user: String = "navd") -> String {
        // In plain text, so the relay sees libpq's messages as they are.
        "postgresql://\(user)@127.0.0.1:\(port)/\(database)?sslmode=disable&gssencmode=disable"
    }

    /// Stops accepting; relayed connections end as their ends close them.
    public func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
    }

    deinit {
        close(listener)
    }

    /// libpq's simple query message for `COMMIT`: 'Q', its length (4 + 7), the text and its NUL.
    private static let commitMessage: [UInt8] = [UInt8(ascii: "Q"), 0, 0, 0, 11] + Array("COMMIT".utf8) + [0]

    private func relay(_ client: Int32) {
        guard let server = try? Self.makeSocket() else {
            close(client)
            return
        }
        var address = Self.loopback(port: target)
        let connected = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
            }
        }
        guard connected else {
            close(server)
            close(client)
            return
        }
        let relayed = RelayedConnection(client: client, server: server)
        Thread.detachNewThread { [self] in
            pumpToServer(relayed)
            relayed.finished()
        }
        Thread.detachNewThread { [self] in
            var buffer = [UInt8](repeating: 0, count: 16_384)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(server, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { break }
                waitWhileStalled()
                // Once cut, the server's reply is read and dropped: nothing more reaches the client.
                if !relayed.isCut { Self.forward(buffer[0..<count], to: client) }
            }
            shutdown(client, Int32(SHUT_RDWR))
            relayed.finished()
        }
    }

    private func pumpToServer(_ relayed: RelayedConnection) {
        let (client, server) = (relayed.client, relayed.server)
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            waitWhileStalled()
            let chunk = Array(buffer[0..<count])
            if let start = Self.find(Self.commitMessage, in: chunk), let cut = armed.withLock({ armed in defer { armed = nil }; return armed }) {
                relayed.cut()
                cuts.add(1, ordering: .relaxed)
                let end = start + Self.commitMessage.count
                switch cut {
                case .beforeTheServer:
                    Self.forward(chunk[0..<start], to: server)
                    shutdown(server, Int32(SHUT_RDWR))
                case .afterTheServer:
                    // The server reads the COMMIT before the end of input, commits, and its
                    // reply is read and dropped by the other pump.
                    Self.forward(chunk[0..<end], to: server)
                    shutdown(server, Int32(SHUT_WR))
                case .replyHeld:
                    // Relayed on as before; the other pump drops every reply from now on.
                    Self.forward(chunk[...], to: server)
                    continue
                }
                shutdown(client, Int32(SHUT_RDWR))
                return
            }
            Self.forward(chunk[...], to: server)
        }
        shutdown(server, Int32(SHUT_WR))
    }

    private static func find(_ pattern: [UInt8], in bytes: [UInt8]) -> Int? {
        guard bytes.count >= pattern.count else { return nil }
        return (0...(bytes.count - pattern.count)).first { start in bytes[start..<(start + pattern.count)].elementsEqual(pattern) }
    }

    private static func forward(_ bytes: ArraySlice<UInt8>, to descriptor: Int32) {
        bytes.withUnsafeBytes { buffer in
            var offset = 0
            while offset < buffer.count {
                let sent = send(descriptor, buffer.baseAddress.map { $0 + offset }, buffer.count - offset, sendFlags)
                guard sent > 0 else { return }
                offset += sent
            }
        }
    }

    private static func makeSocket() throws -> Int32 {
        let descriptor = socket(AF_INET, streamSocketType, 0)
        guard descriptor >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        suppressSIGPIPE(descriptor)
        return descriptor
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = in_addr_t(0x7F00_0001).bigEndian
        return address
    }
}

/// The two sockets of one relayed connection, closed once both directions are done with them.
private final class RelayedConnection: Sendable {
    let client: Int32
    let server: Int32
    private let wasCut = Atomic<Bool>(false)
    private let remaining = Atomic<Int>(2)

    init(client: Int32, server: Int32) {
        self.client = client
        self.server = server
    }

    var isCut: Bool { wasCut.load(ordering: .acquiring) }

    func cut() { wasCut.store(true, ordering: .releasing) }

    func finished() {
        guard remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 else { return }
        close(client)
        close(server)
    }
}
