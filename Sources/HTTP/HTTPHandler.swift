/// The application. Called on a loop thread for every complete request, so it must return
/// quickly; it answers through the responder, from any thread, exactly once.
public protocol HTTPHandler: Sendable {
    func handle(_ request: HTTPRequest, responder: HTTPResponder)
}
