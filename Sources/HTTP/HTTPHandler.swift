/// The application. Both calls come on a loop thread and must return quickly.
public protocol HTTPHandler: Sendable {
    /// Called for every complete request; answers through the responder, from any thread,
    /// exactly once.
    func handle(_ request: HTTPRequest, responder: HTTPResponder)

    /// Writes the answer to a request the HTTP layer refuses on its own (malformed, over a
    /// limit, too slow, over capacity, during shutdown, or left unanswered by `handle`): the
    /// same error format, headers, logging and metrics as every other answer. The status is
    /// the refusal's whatever the response says, and the connection is closed after it.
    func response(to refusal: HTTPRefusal) -> HTTPResponse

    /// Asked when a request waits to be told to send its body (`Expect: 100-continue`): an
    /// answer refuses it before the body is sent (RFC 9110 10.1.1), so a client that may not
    /// make the request (an unknown path, a wrong token) does not upload it first. The
    /// connection is closed after it. Nil, the default: the body is wanted.
    func answerBeforeBody(_ request: HTTPRequest, peer: PeerAddress) -> HTTPResponse?
}

extension HTTPHandler {
    /// Every body is wanted: `100 Continue` for every request that waits for it.
    public func answerBeforeBody(_ request: HTTPRequest, peer: PeerAddress) -> HTTPResponse? { nil }
}
