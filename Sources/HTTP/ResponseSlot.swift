/// The place of one request in a connection's pipeline. Responses are written strictly in
/// slot order, whatever order the handler answers in.
struct ResponseSlot {
    enum Outcome {
        case response(HTTPResponse)
        case stream(EventStream, HTTPHeaders)
    }

    /// HEAD: the body is left out, its length kept.
    var isHead: Bool
    /// The request allows the connection to stay open after this response.
    var keepAlive: Bool
    /// HTTP/1.0 keep-alive must be confirmed with `Connection: keep-alive`.
    var isHTTP10: Bool
    /// A `100 Continue` is owed before the final response.
    var owesContinue = false
    var outcome: Outcome?
}
