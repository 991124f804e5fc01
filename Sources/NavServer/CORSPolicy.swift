#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTP

/// Which browser pages may call navd (`--cors-origin`), and which request headers beyond the
/// API's own they may send (`--cors-headers`).
///
/// Origins are kept in the form browsers send in `Origin` (lowercase scheme and host, no
/// default port, no trailing slash), so matching is a plain comparison and the value echoed in
/// `Access-Control-Allow-Origin` is exactly what the browser checks it against.
public struct CORSPolicy: Sendable, Equatable {
    /// Which pages' origins may call.
    public enum Origins: Sendable, Equatable {
        /// No CORS headers at all: browsers keep other origins' pages out.
        case none
        /// `*`: any page.
        case any
        /// These origins, each in its serialized form.
        case only([String])
    }

    /// The origins allowed (`--cors-origin`).
    public var origins: Origins = .none
    /// Request headers allowed in addition to `baseHeaders`, as configured.
    public var extraHeaders: [String] = []

    /// What the API itself reads from a request.
    static let baseHeaders = ["Authorization", "Content-Type", "If-Match", "Last-Event-ID", "X-Request-ID"]

    /// A policy; the default sends no CORS headers.
    public init(origins: Origins = .none, extraHeaders: [String] = []) {
        self.origins = origins
        self.extraHeaders = extraHeaders
    }

    /// Whether any origin is allowed.
    public var isEnabled: Bool { origins != .none }

    // MARK: - Answering

    /// The page's origin: the request's one `Origin` header. A browser sends one; two (a proxy
    /// that added its own) leave unknown which page asks, so none is granted anything.
    static func origin(of request: HTTPRequest) -> String? {
        let origins = request.headers.values("Origin")
        return origins.count == 1 ? origins[0] : nil
    }

    /// The headers of every response to a request that carried `origin`.
    func responseHeaders(origin: String?) -> [(String, String)] {
        switch origins {
        case .none:
            return []
        case .any:
            return [("Access-Control-Allow-Origin", "*"), ("Access-Control-Expose-Headers", "Location, ETag, X-Request-ID")]
        case .only(let allowed):
            // The answer depends on the Origin header, whether it matched or not: caches must know.
            guard let origin, allowed.contains(origin) else { return [("Vary", "Origin")] }
            return [("Access-Control-Allow-Origin", origin), ("Access-Control-Expose-Headers", "Location, ETag, X-Request-ID"),
                    ("Vary", "Origin")]
        }
    }

    /// What a preflight from `origin` adds to the response headers, if that origin is allowed.
    func preflightHeaders(origin: String?, methods: String) -> [(String, String)] {
        let answer = responseHeaders(origin: origin)
        guard answer.contains(where: { $0.0 == "Access-Control-Allow-Origin" }) else { return answer }
        return answer + [
            ("Access-Control-Allow-Methods", methods),
            ("Access-Control-Allow-Headers", (Self.baseHeaders + extraHeaders).joined(separator: ", ")),
            ("Access-Control-Max-Age", "600"),
        ]
    }

    // MARK: - Parsing settings

    /// Why a setting was refused, in words for the operator.
    public struct Refusal: Error, Equatable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }

    /// `*`, or a comma-separated list of origins; each is normalized, or the whole value refused.
    public static func parseOrigins(_ value: String) throws(Refusal) -> Origins {
        let items = value.split(separator: ",", omittingEmptySubsequences: false).map(trimmed)
        if items.contains("*") {
            guard items.count == 1 else { throw Refusal("* allows every origin; it cannot be listed with others") }
            return .any
        }
        var normalized: [String] = []
        for item in items {
            let origin = try normalizedOrigin(item)
            if !normalized.contains(origin) { normalized.append(origin) }
        }
        return .only(normalized)
    }

    /// `scheme://host[:port]` in the form browsers serialize it, or why `text` is not an origin.
    static func normalizedOrigin(_ text: String) throws(Refusal) -> String {
        let quoted = "\"\(text)\""
        guard !text.isEmpty else { throw Refusal("an empty origin (a stray comma?)") }
        guard text != "null" else {
            throw Refusal("\"null\" is the origin of sandboxed and file pages; allowing it would allow them all")
        }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
            throw Refusal("\(quoted) has spaces or characters beyond ASCII (write an international host name in punycode)")
        }
        guard let separator = text.indices.first(where: { text[$0...].hasPrefix("://") }) else {
            throw Refusal("\(quoted) is not an origin such as https://app.example.com")
        }
        let scheme = text[..<separator].lowercased()
        guard scheme == "http" || scheme == "https" else { throw Refusal("\(quoted) is not an http or https origin") }
        var rest = text[text.index(separator, offsetBy: 3)...]
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains(where: { "/?#".contains($0) }) else {
            throw Refusal("\(quoted) has a path, query or fragment; an origin is only scheme://host[:port]")
        }
        guard !rest.contains("@") else { throw Refusal("\(quoted) has user info; an origin is only scheme://host[:port]") }

        let host: String
        let portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw Refusal("\(quoted) has an unclosed IPv6 address") }
            let address = String(rest[rest.index(after: rest.startIndex)..<close]).lowercased()
            var parsed = in6_addr()
            guard inet_pton(AF_INET6, address, &parsed) == 1 else { throw Refusal("\(quoted) has an invalid IPv6 address") }
            host = "[\(address)]"
            let after = rest[rest.index(after: close)...]
            guard after.isEmpty || after.hasPrefix(":") else { throw Refusal("\(quoted) has text after its IPv6 address") }
            portText = after.isEmpty ? nil : after.dropFirst()
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon].lowercased()
            portText = rest[rest.index(after: colon)...]
        } else {
            host = rest.lowercased()
            portText = nil
        }
        let labels = host.hasPrefix("[") ? [] : host.split(separator: ".", omittingEmptySubsequences: false)
        guard !host.isEmpty, labels.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy(isHostCharacter) }) else {
            throw Refusal("\(quoted) has no valid host")
        }
        var port = ""
        if let portText {
            guard portText.isDecimalDigits, portText.count <= 5,
                  let number = Int(portText), (1...65535).contains(number) else {
                throw Refusal("\(quoted) has an invalid port (1 to 65535)")
            }
            // Browsers leave a scheme's default port out of Origin.
            if !(scheme == "http" && number == 80) && !(scheme == "https" && number == 443) { port = ":\(number)" }
        }
        return "\(scheme)://\(host)\(port)"
    }

    /// A comma-separated list of header names (RFC 9110 tokens), in the case given.
    public static func parseHeaders(_ value: String) throws(Refusal) -> [String] {
        var names: [String] = []
        for item in value.split(separator: ",", omittingEmptySubsequences: false).map(trimmed) {
            guard !item.isEmpty else { throw Refusal("an empty header name (a stray comma?)") }
            guard item != "*" else { throw Refusal("name each header; * would not cover Authorization anyway") }
            guard item.utf8.allSatisfy(ASCII.isTokenCharacter) else { throw Refusal("\"\(item)\" is not a header name") }
            let known = (baseHeaders + names).contains { $0.lowercased() == item.lowercased() }
            if !known { names.append(item) }
        }
        return names
    }

    private static func trimmed(_ text: Substring) -> String {
        String(text.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed())
    }

    private static func isHostCharacter(_ byte: UInt8) -> Bool {
        (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x30 && byte <= 0x39) || byte == 0x2D || byte == 0x5F
    }
}
