/// Where a connection is in its life, as one value: whether it reads new requests, streams,
/// lingers or is closed, and whether its client has closed its side.
///
/// The loop does the I/O and asks this value what follows; every decision about the
/// connection's life is a transition here, pure and unit-tested (`ConnectionStateTests`),
/// rather than flags set from the loop's reading, writing and lifecycle code.
struct ConnectionState {
    enum Mode {
        /// Reads requests and answers them in order.
        case serving
        /// Answers the requests it has and reads no new one: a request asked to close, a
        /// refusal, a stream started, or shutdown. Once the last answer is queued
        /// (`lastAnswerQueued`), the connection lingers when its output has drained.
        case finishing(lastAnswerQueued: Bool)
        /// An event stream, until one side closes it.
        case streaming(StreamProgress)
        /// FIN sent after the last answer; what the client still sends is read and dropped
        /// until it closes or `lingerTimeout` passes, so unread bytes cannot reset the answer.
        case lingering(since: Int64)
        /// The descriptor is closed.
        case closed
    }

    /// An event stream's writing.
    struct StreamProgress {
        let stream: EventStream
        /// A HEAD request: the head goes out, then the stream ends.
        let headOnly: Bool
        /// Waits for a writable report: its socket was full, or it spent its write budget.
        var isBlocked = false
        /// When the application's close was first seen with bytes still waiting.
        var closeRequestedAt: Int64?
    }

    private(set) var mode = Mode.serving
    /// The client sent FIN: what it already sent is answered, then the connection closes.
    private(set) var peerHasClosed = false
    /// A request reached the handler: from then on a quiet connection is idle (`idleTimeout`),
    /// no longer a client slow to send its first head (`headerTimeout`).
    private(set) var hasServedRequest = false

    // MARK: Questions

    var acceptsRequests: Bool {
        if case .serving = mode { true } else { false }
    }

    var isClosed: Bool {
        if case .closed = mode { true } else { false }
    }

    var isLingering: Bool {
        if case .lingering = mode { true } else { false }
    }

    var stream: EventStream? {
        if case .streaming(let progress) = mode { progress.stream } else { nil }
    }

    var isStreamBlocked: Bool {
        if case .streaming(let progress) = mode { progress.isBlocked } else { false }
    }

    /// No answer may follow what is queued: the connection lingers once its output drains.
    var endsAfterOutput: Bool {
        switch mode {
        case .finishing(let lastAnswerQueued): lastAnswerQueued
        case .streaming(let progress): progress.headOnly
        case .serving, .lingering, .closed: false
        }
    }

    // MARK: Transitions

    mutating func requestDispatched() {
        hasServedRequest = true
    }

    /// No new request is read: one asked to close, a refusal, the client's half-sent request, shutdown.
    mutating func stopAcceptingRequests() {
        if case .serving = mode { mode = .finishing(lastAnswerQueued: false) }
    }

    /// The answer that ends the connection is queued: nothing is answered after it.
    mutating func lastAnswerQueued() {
        switch mode {
        case .serving, .finishing: mode = .finishing(lastAnswerQueued: true)
        case .streaming, .lingering, .closed: break
        }
    }

    /// A stream's head is queued: from now on the connection carries the stream's bytes.
    mutating func streamStarted(_ stream: EventStream, headOnly: Bool) {
        switch mode {
        case .serving, .finishing: mode = .streaming(StreamProgress(stream: stream, headOnly: headOnly))
        case .streaming, .lingering, .closed: break
        }
    }

    /// What follows once everything queued has been written.
    enum AfterOutput: Equatable {
        /// Send FIN and linger; a head-only stream ends first.
        case linger
        /// Write the stream's queued bytes.
        case writeStream
        /// Read on: the next request, or the end of this one.
        case readOn
    }

    /// The output has drained. A head-only stream is over at this point: the stream to
    /// finish is handed back with the decision.
    mutating func outputDrained() -> (next: AfterOutput, endedStream: EventStream?) {
        switch mode {
        case .finishing(lastAnswerQueued: true):
            return (.linger, nil)
        case .streaming(let progress) where progress.headOnly:
            mode = .finishing(lastAnswerQueued: true)
            return (.linger, progress.stream)
        case .streaming:
            return (.writeStream, nil)
        case .serving, .finishing, .lingering, .closed:
            return (.readOn, nil)
        }
    }

    /// How lingering starts.
    enum LingerStart: Equatable {
        /// Shut the socket's writing side and read on until the client closes.
        case shutDownWriting
        /// Close at once: the client has closed already, or lingering is off.
        case close
        /// Already lingering or closed.
        case nothing
    }

    mutating func beginLinger(now: Int64, enabled: Bool) -> LingerStart {
        switch mode {
        case .lingering, .closed:
            return .nothing
        case .serving, .finishing, .streaming:
            guard enabled, !peerHasClosed else { return .close }
            mode = .lingering(since: now)
            return .shutDownWriting
        }
    }

    /// Closes the connection; false if it was closed already. A stream it carried must be
    /// finished by the caller (read `stream` first).
    mutating func close() -> Bool {
        if case .closed = mode { return false }
        mode = .closed
        return true
    }

    /// What the client's FIN means.
    enum PeerClose: Equatable {
        /// Close now: nothing is owed, or the connection only streams or lingers.
        case close
        /// Answer what already arrived, then close.
        case answerWhatArrived
    }

    /// The client closed its side. `owesAnswers`: requests are unanswered or answers unwritten.
    mutating func peerClosed(owesAnswers: Bool) -> PeerClose {
        switch mode {
        case .streaming, .lingering, .closed:
            return .close
        case .serving, .finishing:
            guard owesAnswers else { return .close }
            peerHasClosed = true
            return .answerWhatArrived
        }
    }

    /// A stream's write ended: `blocked` if it waits for the socket (or its budget).
    mutating func streamWrote(blocked: Bool) {
        guard case .streaming(var progress) = mode else { return }
        progress.isBlocked = blocked
        mode = .streaming(progress)
    }

    /// The application asked to close the stream while bytes still wait: the close timeout runs
    /// from the first time this is seen.
    mutating func streamCloseWaits(now: Int64) {
        guard case .streaming(var progress) = mode, progress.closeRequestedAt == nil else { return }
        progress.closeRequestedAt = now
        mode = .streaming(progress)
    }

    // MARK: Timeouts

    /// What the connection's buffers and clocks show, for deciding its timeouts.
    struct Activity {
        /// Since the current head, body, idle or linger period began.
        var elapsedInPhase: Int64
        var sinceWriteProgress: Int64
        var outputPending: Bool
        /// Bytes of answers written but not yet taken by the socket.
        var outputBytes: Int
        var unansweredRequests: Bool
        var readPhase: Connection.ReadPhase
        /// Part of a head has arrived.
        var receivingHead: Bool
        var canStartRequest: Bool
        var streamQueuedBytes: Int
        /// The server's clients hold more than `maxBufferedOutput` waiting for them.
        var outputPressed = false
        /// Since its client last sent bytes.
        var sinceReadProgress: Int64 = 0
        /// The server's clients are sending more than `maxBufferedBodies` of bodies together.
        var bodiesPressed = false
    }

    enum Timeout: Equatable {
        case close(EventStreamCloseReason)
        /// Answer 408 to the head being received, then close.
        case refuseHead
        /// Answer 408 to the request whose body is being received, then close.
        case refuseBody
    }

    /// The timeout that has run out, if any, `now` being the loop's clock.
    func expired(_ activity: Activity, now: Int64, settings: LoopSettings) -> Timeout? {
        switch mode {
        case .closed:
            return nil
        case .lingering(let since):
            return now - since > settings.lingerTimeout ? .close(.clientClosed) : nil
        case .streaming(let progress):
            if let asked = progress.closeRequestedAt, now - asked > settings.streamCloseTimeout {
                return .close(.closedByServer)
            }
            // Many clients behind at once: a stream whose client takes nothing goes, to resume:
            // within two sweeps when far behind, after the stall timeout when a little. One
            // whose client reads stays, however far behind (a large snapshot on its way).
            if activity.outputPressed, progress.isBlocked || activity.outputPending, activity.streamQueuedBytes > 0,
               activity.sinceWriteProgress > (activity.streamQueuedBytes > settings.streamBufferLimit / 16
                   ? 2 * settings.sweepInterval : settings.streamStallTimeout) {
                return .close(.tooSlow)
            }
            // Over its limit, a stream holds a large message, or events behind one: not read.
            if progress.isBlocked || activity.outputPending, activity.sinceWriteProgress > settings.streamStallTimeout,
               activity.streamQueuedBytes > settings.streamBufferLimit {
                return .close(.tooSlow)
            }
            return nil
        case .serving, .finishing:
            break
        }
        // The client leaves an answer unread. A large one (over a stream's limit, as a big
        // snapshot would be) is held only as long as a stream's would: a session's state can be
        // megabytes, and a minute of every such answer left unread is memory a client can pile up.
        // So is any answer while the server's clients hold more than their bound together, and
        // one more than a sixteenth of a stream's limit only two sweeps, as a stream far behind:
        // what unread answers hold grows with the rate new ones come, which a client sets.
        let patience: Int64 = if activity.outputPressed && activity.outputBytes > settings.streamBufferLimit / 16 {
            min(settings.idleTimeout, 2 * settings.sweepInterval)
        } else if activity.outputBytes > settings.streamBufferLimit || activity.outputPressed {
            min(settings.idleTimeout, settings.streamStallTimeout)
        } else {
            settings.idleTimeout
        }
        // Closed as too slow, with a reset: a FIN would queue behind what the socket still holds,
        // and the kernel would go on feeding it to a client that trickles for minutes.
        if activity.outputPending && activity.sinceWriteProgress > patience {
            return .close(.tooSlow)
        }
        switch activity.readPhase {
        case .head:
            if activity.receivingHead && activity.canStartRequest {
                return activity.elapsedInPhase > settings.headerTimeout ? .refuseHead : nil
            }
            guard !activity.unansweredRequests else { return nil }
            let limit = hasServedRequest ? settings.idleTimeout : settings.headerTimeout
            return activity.elapsedInPhase > limit ? .close(.clientClosed) : nil
        case .fixedBody, .chunkedBody:
            // Many bodies arriving at once: one whose client has stopped sending goes, as a
            // stream whose client stopped reading does.
            if activity.bodiesPressed && activity.sinceReadProgress > 2 * settings.sweepInterval { return .refuseBody }
            return activity.elapsedInPhase > settings.bodyTimeout ? .refuseBody : nil
        case .discard:
            return nil
        }
    }
}
