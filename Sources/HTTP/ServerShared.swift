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
    /// Bytes waiting for clients on every loop, as each loop counted its own at its last sweep:
    /// what `maxBufferedOutput` bounds.
    let bufferedOutput = Atomic<Int>(0)
    /// Bytes of request bodies on every loop, counted as they arrive and until their requests
    /// are answered: what `maxBufferedBodies` bounds.
    let bufferedBodies = Atomic<Int>(0)
    /// Bodies refused for that bound so far: the bound holds, so a count is how the loops hear
    /// that clients want more than it, and shed the bodies that stopped arriving.
    let bodyRefusals = Atomic<Int>(0)
    /// At the drain's deadline: loops yet to refuse their unfinished bodies, and refused
    /// connections still open, which the stop waits for a moment (and only for them).
    let loopsRefusingUnfinished = Atomic<Int>(0)
    let refusedAtDeadline = Atomic<Int>(0)
    /// Round-robin position for handing accepted connections to loops.
    let nextLoop = Atomic<Int>(0)
    /// Set by beginShutdown: accepted connections are answered 503 at once, not served.
    let stopping = Atomic<Bool>(false)
    /// Set by finishShutdown: the loops stop, and work placed on them moves to their executors'
    /// own queues at once instead of keeping a loop from stopping.
    let halting = Atomic<Bool>(false)

    /// Loops that may still accept from `listenFD`; the last to let go closes it.
    private let listenerHolders: Atomic<Int>
    private let listenerClosed = Atomic<Bool>(false)

    init(listenFD: Int32, settings: LoopSettings, handler: any HTTPHandler, loopCount: Int) {
        self.listenFD = listenFD
        self.settings = settings
        self.handler = handler
        self.listenerHolders = Atomic(loopCount)
    }

    /// A loop is done with the listener (it drained the accept queue at shutdown). Once every
    /// loop is, the socket closes, and clients still connecting are refused.
    func releaseListener() {
        if listenerHolders.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 { closeListener() }
    }

    /// Closes the listening socket, once.
    func closeListener() {
        guard !listenerClosed.exchange(true, ordering: .acquiringAndReleasing) else { return }
        closeDescriptor(listenFD)
    }

    /// The handler's answer to a refusal, with the refusal's status whatever it says.
    func response(refusing error: ProtocolError, request: HTTPRequest?, peer: PeerAddress) -> HTTPResponse {
        var response = handler.response(to: HTTPRefusal(error, request: request, peer: peer))
        response.status = error.status
        return response
    }
}
