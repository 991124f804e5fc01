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
}
