import Dispatch
import NavigationCore
import SessionStorage
import Synchronization

/// A session as the server hosts it: its navigation, its credentials and its open streams.
final class HostedSession: Sendable {
    let id: String
    let feature: String
    let navigation: NavigationSession
    let events: SessionEvents
    /// One-time credentials for `?ticket=` on the event stream; in memory only.
    let tickets = StreamTickets()
    /// Only the token's hash is kept, in memory as on disk.
    let tokenHash: [UInt8]
    private let lastActive: Atomic<Int64>

    init(id: String, tokenHash: [UInt8], navigation: NavigationSession, events: SessionEvents) {
        self.id = id
        self.tokenHash = tokenHash
        self.feature = navigation.feature
        self.navigation = navigation
        self.events = events
        self.lastActive = Atomic(Self.now())
    }

    func accepts(_ candidate: String?) -> Bool {
        guard let candidate else { return false }
        return TokenHash.matches(candidate, tokenHash)
    }

    func touch() { lastActive.store(Self.now(), ordering: .relaxed) }

    /// Idle: no request for `ttl` and no open stream.
    func isIdle(for ttl: Duration) -> Bool {
        guard events.count == 0 else { return false }
        return .nanoseconds(Self.now() - lastActive.load(ordering: .relaxed)) >= ttl
    }

    private static func now() -> Int64 {
        Int64(DispatchTime.now().uptimeNanoseconds)
    }
}

/// Random identifiers: session ids of 128 bits, tokens of 256 bits, from the system's CSPRNG.
enum Identifiers {
    static func sessionID() -> String { hex(bytes: 16) }
    static func token() -> String { hex(bytes: 32) }

    private static func hex(bytes count: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(count * 2)
        for _ in 0..<count {
            let byte = UInt8.random(in: 0...255, using: &generator)
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Every hosted session, by id.
final class SessionStore: Sendable {
    private let sessions = Mutex<[String: HostedSession]>([:])
    let limit: Int?

    init(limit: Int?) {
        self.limit = limit
    }

    var count: Int { sessions.withLock { $0.count } }

    var all: [HostedSession] { sessions.withLock { Array($0.values) } }

    /// `false` when the server is at capacity.
    func insert(_ session: HostedSession) -> Bool {
        sessions.withLock { sessions in
            if let limit, sessions.count >= limit { return false }
            sessions[session.id] = session
            return true
        }
    }

    func hasRoom() -> Bool {
        guard let limit else { return true }
        return count < limit
    }

    func session(_ id: String) -> HostedSession? {
        sessions.withLock { $0[id] }
    }

    @discardableResult
    func remove(_ id: String) -> HostedSession? {
        sessions.withLock { $0.removeValue(forKey: id) }
    }
}
