import Synchronization

/// What the loops of one server share: the listening socket and the counters.
final class ServerShared: Sendable {
    let listenFD: Int32
    let settings: LoopSettings
    let handler: any HTTPHandler
    /// Connections admitted: what `maxConnections` limits.
    let openConnections = Atomic<Int>(0)
    /// Connections answered at accept without being served (over capacity, shutting down),
    /// kept only to drain their requests: counted apart, so they never hold an admitted slot.
    let refusingConnections = Atomic<Int>(0)
    /// Round-robin position for handing accepted connections to loops.
    let nextLoop = Atomic<Int>(0)
    /// Set by beginShutdown: accepted connections are closed at once.
    let stopping = Atomic<Bool>(false)

    init(listenFD: Int32, settings: LoopSettings, handler: any HTTPHandler) {
        self.listenFD = listenFD
        self.settings = settings
        self.handler = handler
    }

    /// The handler's answer to a refusal, with the refusal's status whatever it says.
    func response(refusing error: ProtocolError, request: HTTPRequest?, peer: PeerAddress) -> HTTPResponse {
        var response = handler.response(to: HTTPRefusal(error, request: request, peer: peer))
        response.status = error.status
        return response
    }
}
