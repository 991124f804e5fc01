/// A request the HTTP layer answers on its own instead of handing it to the handler, with what
/// is known of it, so the application can write the answer as it writes every other one (its
/// error body, its headers) and account for it (its log, its metrics).
public struct HTTPRefusal: Sendable {
    public let error: ProtocolError
    /// The request's head (its body left out) when it was read whole: a body over its limit,
    /// in a transfer coding navd does not decode, too slow or malformed, a handler that failed.
    /// Nil when the head itself was at fault or never read (over capacity, shutting down, a
    /// head that did not arrive in time).
    public let request: HTTPRequest?
    /// The client's address, for logs.
    public let peer: PeerAddress

    init(_ error: ProtocolError, request: HTTPRequest?, peer: PeerAddress) {
        self.error = error
        self.request = request
        self.peer = peer
    }
}
