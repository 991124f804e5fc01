/// A parsed request head: the request as the handler will see it (without its body) and
/// what the server needs to frame the body and the connection.
struct RequestHead: Sendable {
    enum BodyFraming: Sendable, Equatable {
        case none
        case length(Int)
        case chunked
    }

    var request: HTTPRequest
    var isHTTP11: Bool
    var framing: BodyFraming
    var connectionClose: Bool
    var connectionKeepAlive: Bool
    var expectsContinue: Bool

    /// Whether the connection may serve another request after this one.
    var keepAlive: Bool {
        if connectionClose { return false }
        return isHTTP11 || connectionKeepAlive
    }
}
