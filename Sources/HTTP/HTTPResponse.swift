/// A complete response. The server adds `Content-Length` (and `Connection` when needed);
/// any `Content-Length`, `Transfer-Encoding` or `Connection` set here is replaced.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]
    /// The answer to a `HEAD` of what `GET` streams (an event stream): it gets the stream's own
    /// head fields and no `Content-Length`, since the length `GET` would send is not known,
    /// while the connection stays open for the next request.
    public var describesEventStream = false

    public init(status: Int, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response; sets `Content-Type: application/json; charset=utf-8`.
    public static func json(status: Int, _ body: [UInt8], headers: HTTPHeaders = [:]) -> HTTPResponse {
        var headers = headers
        // Room for what every answer gets on its way out (the request id, CORS), at once.
        headers.reserveCapacity(headers.count + 4)
        headers.set("Content-Type", "application/json; charset=utf-8")
        return HTTPResponse(status: status, headers: headers, body: body)
    }
}
