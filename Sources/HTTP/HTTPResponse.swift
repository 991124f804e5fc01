/// A complete response. The server adds `Content-Length` (and `Connection` when needed);
/// any `Content-Length`, `Transfer-Encoding` or `Connection` set here is replaced.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: Int, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A JSON response; sets `Content-Type: application/json; charset=utf-8`.
    public static func json(status: Int, _ body: [UInt8], headers: HTTPHeaders = [:]) -> HTTPResponse {
        var headers = headers
        headers.set("Content-Type", "application/json; charset=utf-8")
        return HTTPResponse(status: status, headers: headers, body: body)
    }

    /// The error shape every failure uses: `{"error":{"code":"...","message":"..."}}`.
    public static func error(status: Int, code: String, message: String, headers: HTTPHeaders = [:]) -> HTTPResponse {
        var body: [UInt8] = []
        body.reserveCapacity(32 + code.utf8.count + message.utf8.count)
        ASCII.append(#"{"error":{"code":"#, to: &body)
        JSONString.append(code, to: &body)
        ASCII.append(#","message":"#, to: &body)
        JSONString.append(message, to: &body)
        ASCII.append("}}", to: &body)
        return json(status: status, body, headers: headers)
    }
}
