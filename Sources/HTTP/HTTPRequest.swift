/// A complete request as received; the body is fully read before the handler sees it.
public struct HTTPRequest: Sendable {
    /// As sent, e.g. "GET" or "HEAD" (methods are case-sensitive).
    public var method: String
    /// The raw request-target, e.g. "/sessions/ab?token=x".
    public var target: String
    /// The percent-decoded path without the query.
    public var path: String
    /// Percent-decoded query parameters in order, with '+' read as a space.
    public var query: [(name: String, value: String)]
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// "HTTP/1.1" or "HTTP/1.0".
    public var version: String

    /// Builds a request as the server would, e.g. for testing handlers without a socket.
    /// A target whose path cannot be decoded keeps it undecoded.
    public init(
        method: String,
        target: String,
        version: String = "HTTP/1.1",
        headers: HTTPHeaders = [:],
        body: [UInt8] = []
    ) {
        let parts = Array(target.utf8).withUnsafeBytes { RequestTarget.decode($0) }
        self.init(
            method: method,
            target: target,
            path: parts?.path ?? String(target.prefix { $0 != "?" }),
            query: parts?.query ?? [],
            headers: headers,
            body: body,
            version: version
        )
    }

    init(
        method: String,
        target: String,
        path: String,
        query: [(name: String, value: String)],
        headers: HTTPHeaders,
        body: [UInt8],
        version: String
    ) {
        self.method = method
        self.target = target
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.version = version
    }

    /// The path as sent, still percent-encoded, without the query. A router splits this into
    /// segments and decodes each one, not `path`, so that an encoded slash ("%2F") stays inside
    /// its segment instead of separating two.
    public var encodedPath: Substring {
        var target = target
        guard let range = target.withUTF8({ RequestTarget.pathRange(UnsafeRawBufferPointer($0)) }) else { return target[...] }
        // An absolute-form target without a path ("http://host") asks for "/" (RFC 9110 4.2.3).
        guard !range.isEmpty else { return "/" }
        let start = target.utf8.index(target.utf8.startIndex, offsetBy: range.lowerBound)
        return Substring(target.utf8[start..<target.utf8.index(start, offsetBy: range.count)])
    }

    /// The host (and port) the request is for: an absolute-form target's authority, which wins
    /// over the Host field (RFC 9112 3.2.2), else the Host field; nil when it names none (an
    /// HTTP/1.0 request without Host).
    public var authority: Substring? {
        var target = target
        if let range = target.withUTF8({ RequestTarget.absoluteFormAuthority(UnsafeRawBufferPointer($0)) }) {
            let start = target.utf8.index(target.utf8.startIndex, offsetBy: range.lowerBound)
            return Substring(target.utf8[start..<target.utf8.index(start, offsetBy: range.count)])
        }
        return headers["Host"].map { $0[...] }
    }

    /// Percent-decodes one segment of `encodedPath`; nil on a broken escape or invalid UTF-8.
    public static func decodePathSegment(_ segment: UnsafeBufferPointer<UInt8>) -> String? {
        RequestTarget.decodeComponent(UnsafeRawBufferPointer(segment), plusIsSpace: false)
    }

    /// The first value of a query parameter.
    public func queryValue(_ name: String) -> String? {
        query.first { $0.name == name }?.value
    }
}
