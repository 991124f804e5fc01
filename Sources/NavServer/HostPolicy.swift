#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTP

/// Which host names a request may say it is for (`--allowed-hosts`): the guard against DNS
/// rebinding. A page on an attacker's name can have that name resolve to navd's address, after
/// which the browser treats navd as the page's own origin and lets it read every answer. The
/// browser still sends the attacker's name in `Host`, so refusing names navd was not told it
/// serves closes the hole.
///
/// An address (`127.0.0.1:8080`, `[::1]`) always passes: a browser sends one only for a URL that
/// names it, and then the page's origin is navd's own, with nothing to rebind. So do requests that
/// name no host at all (HTTP/1.0 without `Host`). Probes and scrapers that call by address
/// (Kubernetes, Prometheus) therefore need no entry.
public struct HostPolicy: Sendable, Equatable, CustomStringConvertible {
    /// Which names pass.
    public enum Names: Sendable, Equatable {
        /// Every name: for a server behind a proxy that checks names itself, or reached by many.
        case any
        /// These names, lowercased, without a trailing dot; one that starts with a dot
        /// (`.example.com`) also passes every name under it.
        case only([String])
    }

    /// The names answered for.
    public var names: Names

    /// A policy answering for `names`.
    public init(_ names: Names) {
        self.names = names
    }

    /// What a server gets unless told otherwise. On a loopback address only local pages can be
    /// rebound to it, and only `localhost` and the names under it (which browsers resolve to
    /// loopback themselves) are its own. On any other address the names it is reached by are
    /// the deployment's, unknown here.
    public static func standard(listeningOn host: String) -> HostPolicy {
        isLoopback(host) ? HostPolicy(.only([".localhost"])) : HostPolicy(.any)
    }

    /// Whether a request for `authority` (a host and optional port, as `Host` carries it) is
    /// answered.
    public func allows(_ authority: Substring?) -> Bool {
        guard case .only(let allowed) = names, let authority else { return true }
        switch Self.host(in: authority) {
        case .address:
            return true
        case .malformed:
            return false
        case .name(let name):
            return allowed.contains { entry in
                entry.first == "." ? name == entry.dropFirst() || name.hasSuffix(entry) : name == entry
            }
        }
    }

    /// What an authority names.
    enum Host: Equatable {
        /// An IPv4 address, or an IPv6 one in brackets.
        case address
        /// A name, lowercased and without a trailing dot.
        case name(String)
        /// Neither: user info (`localhost@evil.example`), escapes, a port that is not a number.
        /// Not one of the names allowed, whatever it starts or ends with.
        case malformed
    }

    static func host(in authority: Substring) -> Host {
        var host = authority
        if let colon = host.lastIndex(of: ":"), host.first != "[" || host[..<colon].last == "]" {
            guard host[host.index(after: colon)...].utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
                return .malformed
            }
            host = host[..<colon]
        }
        if host.first == "[" {
            guard host.count > 2, host.last == "]" else { return .malformed }
            return isIPv6(host.dropFirst().dropLast()) ? .address : .malformed
        }
        if host.last == "." { host = host.dropLast() }
        if isIPv4(host) { return .address }
        guard !host.isEmpty, host.utf8.allSatisfy({ isNameByte(ASCII.lowercased($0)) }) else {
            return .malformed
        }
        return .name(host.lowercased())
    }

    private static func isIPv6(_ text: Substring) -> Bool {
        var address = in6_addr()
        return inet_pton(AF_INET6, String(text), &address) == 1
    }

    /// Four dot-separated decimal numbers up to 255, read on the bytes: every request asks.
    private static func isIPv4(_ host: Substring) -> Bool {
        var parts = 0, digits = 0, value = 0
        for byte in host.utf8 {
            if byte == UInt8(ascii: ".") {
                guard digits > 0 else { return false }
                parts += 1
                digits = 0
                value = 0
            } else if byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 3 {
                digits += 1
                value = value * 10 + Int(byte - UInt8(ascii: "0"))
                guard value <= 255 else { return false }
            } else {
                return false
            }
        }
        return parts == 3 && digits > 0
    }

    /// `localhost`, 127.0.0.0/8, or `::1` and 127.0.0.0/8 mapped into IPv6, however written.
    private static func isLoopback(_ host: String) -> Bool {
        if host == "localhost" { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 { return withUnsafeBytes(of: &v4) { $0[0] == 127 } }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, host, &v6) == 1 else { return false }
        return withUnsafeBytes(of: &v6) { bytes in
            bytes.prefix(15).allSatisfy { $0 == 0 } && bytes[15] == 1
                || bytes.prefix(10).allSatisfy { $0 == 0 } && bytes[10] == 0xFF && bytes[11] == 0xFF && bytes[12] == 127
        }
    }

    // MARK: - Parsing settings

    /// Why a setting was refused, in words for the operator.
    public struct Refusal: Error, Equatable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// Reads `--allowed-hosts`: `*`, or names separated by commas.
    public static func parse(_ value: String) throws(Refusal) -> HostPolicy {
        let entries = value.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingSpaces.lowercased() }
        guard !entries.isEmpty, entries.allSatisfy({ !$0.isEmpty }) else {
            throw Refusal("give names separated by commas, or * (an empty name: a stray comma?)")
        }
        if entries == ["*"] { return HostPolicy(.any) }
        var names: [String] = []
        for entry in entries {
            let bare = entry.last == "." ? String(entry.dropLast()) : entry
            let label = bare.first == "." ? bare.dropFirst() : bare[...]
            let parts = label.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.allSatisfy({ !$0.isEmpty }), label.utf8.allSatisfy(isNameByte) else {
                throw Refusal("\"\(entry)\" is not a host name (* stands alone; a leading dot allows the names under one)")
            }
            guard host(in: label) != .address else {
                throw Refusal("\"\(entry)\" is an address; addresses always pass, so list names only")
            }
            names.append(bare)
        }
        return HostPolicy(.only(names))
    }

    /// `*`, or the names joined by commas, for the `listening` line.
    public var description: String {
        switch names {
        case .any: "*"
        case .only(let names): names.joined(separator: ",")
        }
    }

    /// Letters, digits, `-` and `.`: what a DNS name is made of (`_` too, which some use).
    private static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"):
            return true
        default:
            return false
        }
    }
}
