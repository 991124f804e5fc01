#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A client's IP address and port, kept compact (no 128-byte sockaddr per connection) and
/// formatted only when asked for: most requests are never logged, and formatting is a
/// system call and three allocations.
public struct PeerAddress: Sendable, CustomStringConvertible {
    private let high: UInt64
    private let low: UInt64
    private let port: UInt16
    private let isIPv6: Bool

    static let unknown = PeerAddress(high: 0, low: 0, port: 0, isIPv6: false)

    private init(high: UInt64, low: UInt64, port: UInt16, isIPv6: Bool) {
        self.high = high
        self.low = low
        self.port = port
        self.isIPv6 = isIPv6
    }

    init(_ storage: sockaddr_storage) {
        var storage = storage
        switch Int32(storage.ss_family) {
        case AF_INET:
            let address = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in.self) }
            self.init(high: 0, low: UInt64(address.sin_addr.s_addr), port: UInt16(bigEndian: address.sin_port), isIPv6: false)
        case AF_INET6:
            let address = withUnsafeBytes(of: &storage) { $0.load(as: sockaddr_in6.self) }
            var bytes = address.sin6_addr
            let (high, low) = withUnsafeBytes(of: &bytes) { raw in
                (raw.loadUnaligned(fromByteOffset: 0, as: UInt64.self), raw.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
            }
            self.init(high: high, low: low, port: UInt16(bigEndian: address.sin6_port), isIPv6: true)
        default:
            self = .unknown
        }
    }

    /// "127.0.0.1:5555" or "[::1]:5555".
    public var description: String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        if isIPv6 {
            var raw = (high, low)
            _ = withUnsafeBytes(of: &raw) { inet_ntop(AF_INET6, $0.baseAddress, &text, socklen_t(text.count)) }
            return "[\(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))]:\(port)"
        }
        var raw = UInt32(truncatingIfNeeded: low)
        _ = withUnsafeBytes(of: &raw) { inet_ntop(AF_INET, $0.baseAddress, &text, socklen_t(text.count)) }
        return "\(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)):\(port)"
    }
}
