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
public struct HostPolicy: Sendable, Equatable {
    /// Which names pass.
    public enum Names: Sendable, Equatable {
        /// Every name: for a server behind a proxy that checks names itself, or reached by many.
        case any
        /// These names, lowercased, without a trailing dot; one that starts with a dot
        /// (`.example.com`) also passes every name under it.
        case only([String])
    }

    public var names: Names

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
        guard let name = Self.name(in: authority) else { return true }
        // Only a name (no user info, no escapes) can be one of the names allowed, or under one.
        guard name.utf8.allSatisfy(Self.isNameByte) else { return false }
        return allowed.contains { entry in
            entry.first == "." ? name == entry.dropFirst() || name.hasSuffix(entry) : name == entry
        }
    }

    /// The authority's host as a name to compare, lowercased and without a trailing dot; nil
    /// when it is an address.
    static func name(in authority: Substring) -> String? {
        if authority.first == "[" { return nil }
        var host = authority
        if let colon = host.lastIndex(of: ":") { host = host[..<colon] }
        if host.last == "." { host = host.dropLast() }
        if isIPv4(host) { return nil }
        return host.lowercased()
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

    private static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.") && isIPv4(host[...])
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
            guard !label.isEmpty, label.utf8.allSatisfy(isNameByte) else {
                throw Refusal("\"\(entry)\" is not a host name (* stands alone; a leading dot allows the names under one)")
            }
            guard name(in: label) != nil else {
                throw Refusal("\"\(entry)\" is an address; addresses always pass, so list names only")
            }
            names.append(bare)
        }
        return HostPolicy(.only(names))
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
