#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension EventLoop {
    /// Empty lines a client may send before a request (RFC 9112 §2.2 asks for at least one).
    static let maxBlankLineBytes = 64

    /// One read per readiness event into the loop's scratch buffer; only bytes that cannot be
    /// used yet are copied into the connection.
    func readable(_ connection: Connection) {
        switch SocketIO.read(connection.fd, into: readBuffer) {
        case .wouldBlock:
            return
        case .closed:
            peerClosed(connection)
        case .transferred(let count):
            connection.lastReadProgress = now
            if connection.state.isLingering || connection.state.stream != nil { return }
            if case .discard = connection.phase { return }
            feed(connection, UnsafeRawBufferPointer(rebasing: readBuffer[0..<count]))
            if countBody(connection) { refuseForBodies(connection) }
            if shuttingDown { afterReadWhileDraining(connection) }
            updateInterest(connection)
        }
    }

    /// Brings `shared.bufferedBodies` up to date with what `connection` holds of a body (`held`,
    /// by default the body still arriving). Returns whether the body grew past the server's
    /// bound for all bodies together: counted as bytes arrive, so a burst of bodies is stopped
    /// at the bound, not a sweep later. A body that arrives whole within one read is never held,
    /// so costs nothing here.
    @discardableResult
    func countBody(_ connection: Connection, holding held: Int? = nil) -> Bool {
        guard let bound = settings.maxBufferedBodies else { return false }
        let held = held ?? connection.body?.bytes.count ?? 0
        let counted = connection.countedBodyBytes
        guard held != counted else { return false }
        connection.countedBodyBytes = held
        let total = shared.bufferedBodies.add(held - counted, ordering: .relaxed).newValue
        return held > counted && total > bound
    }

    /// Refuses the body that took the server's bodies past their bound, and lets its count go.
    private func refuseForBodies(_ connection: Connection) {
        shared.bodyRefusals.add(1, ordering: .relaxed)
        refuseBody(connection, .bodiesOverCapacity)
        countBody(connection)
    }

    private func feed(_ connection: Connection, _ bytes: UnsafeRawBufferPointer) {
        if connection.pending.isEmpty {
            let used = consume(connection, bytes)
            if used < bytes.count && connection.state.acceptsRequests {
                connection.pending = Array(bytes[used...])
            }
        } else {
            connection.pending.append(contentsOf: bytes)
            parsePending(connection)
        }
    }

    /// Parses input that was left over, e.g. after a pause for a full pipeline.
    func parsePending(_ connection: Connection) {
        let buffered = connection.pending
        connection.pending = []
        let used = buffered.withUnsafeBytes { consume(connection, $0) }
        guard used < buffered.count, connection.state.acceptsRequests else { return }
        connection.pending = used == 0 ? buffered : Array(buffered[used...])
    }

    /// Parses as much as possible and returns how many bytes were used.
    private func consume(_ connection: Connection, _ bytes: UnsafeRawBufferPointer) -> Int {
        var index = 0
        while index < bytes.count && !connection.state.isClosed {
            switch connection.phase {
            case .discard:
                return bytes.count
            case .head:
                guard connection.canStartRequest(settings) else { return index }
                if !connection.scanner.hasStarted {
                    // Blank lines before a request are ignored (RFC 9112 §2.2), a few of them:
                    // endless ones would be reading without a bound.
                    let start = index
                    while index + 1 < bytes.count && bytes[index] == ASCII.cr && bytes[index + 1] == ASCII.lf {
                        index += 2
                    }
                    connection.blankLineBytes += index - start
                    guard connection.blankLineBytes <= Self.maxBlankLineBytes else {
                        refuse(connection, .badRequest("Too many empty lines before the request."))
                        return bytes.count
                    }
                    if index == bytes.count { return index }
                    // A CR at the very end may be half of such a line, its LF in the next read:
                    // kept back unscanned, or the scanner would take it for an empty request line.
                    if index + 1 == bytes.count && bytes[index] == ASCII.cr { return index }
                    connection.blankLineBytes = 0
                    connection.phaseStart = now
                }
                let head = UnsafeRawBufferPointer(rebasing: bytes[index...])
                switch connection.scanner.scan(
                    head, maxRequestLine: settings.maxRequestLineBytes, maxHeaderBytes: settings.maxHeaderBytes)
                {
                case .incomplete:
                    return index
                case .failure(let error):
                    refuse(connection, error, isHead: Self.namesHEAD(head))
                    return bytes.count
                case .complete(let length, let requestLineLength):
                    connection.scanner = HeadScanner()
                    let parsed = RequestHeadParser.parse(
                        UnsafeRawBufferPointer(rebasing: head[0..<length]),
                        requestLineLength: requestLineLength,
                        maxBodyBytes: settings.maxBodyBytes)
                    index += length
                    switch parsed {
                    case .failure(let error):
                        refuse(connection, error, request: Self.refusedRequest(
                            error, UnsafeRawBufferPointer(rebasing: head[0..<length]), requestLineLength: requestLineLength),
                               isHead: Self.namesHEAD(head))
                        return bytes.count
                    case .success(let head):
                        startRequest(connection, head, bodyBytesFollow: index < bytes.count)
                    }
                }
            case .fixedBody(let remaining):
                let take = min(remaining, bytes.count - index)
                connection.body?.bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + take)]))
                index += take
                if take == remaining {
                    finishBody(connection)
                } else {
                    connection.phase = .fixedBody(remaining: remaining - take)
                }
            case .chunkedBody:
                // A chunked phase always has its body; without one there is nothing to decode into.
                guard let body = connection.body else { return bytes.count }
                let outcome = body.chunked.decode(
                    UnsafeRawBufferPointer(rebasing: bytes[index...]),
                    into: &body.bytes,
                    maxBodyBytes: settings.maxBodyBytes,
                    maxTrailerBytes: settings.maxHeaderBytes)
                switch outcome {
                case .needsMore:
                    return bytes.count
                case .finished(let consumed):
                    index += consumed
                    finishBody(connection)
                case .failure(let error):
                    refuseBody(connection, error)
                    return bytes.count
                }
            }
        }
        return index
    }

    private func startRequest(_ connection: Connection, _ head: RequestHead, bodyBytesFollow: Bool) {
        let keepAlive = head.keepAlive && !shuttingDown
        if !keepAlive { connection.state.stopAcceptingRequests() }
        let sequence = connection.openSlot(ResponseSlot(
            isHead: head.request.method == "HEAD", keepAlive: keepAlive, isHTTP10: !head.isHTTP11))
        switch head.framing {
        case .none:
            dispatch(head.request, on: connection, sequence: sequence)
        case .length(let length):
            connection.phase = .fixedBody(remaining: length)
            awaitBody(connection, head, sequence: sequence, bodyBytesFollow: bodyBytesFollow)
            connection.body?.bytes.reserveCapacity(min(length, 64 * 1024))
        case .chunked:
            connection.phase = .chunkedBody
            awaitBody(connection, head, sequence: sequence, bodyBytesFollow: bodyBytesFollow)
        }
    }

    private func awaitBody(_ connection: Connection, _ head: RequestHead, sequence: UInt64, bodyBytesFollow: Bool) {
        connection.body = BodyInProgress(head: head, sequence: sequence)
        connection.phaseStart = now
        if head.expectsContinue && head.isHTTP11 && !bodyBytesFollow, let index = connection.slotIndex(sequence) {
            if let answer = shared.handler.answerBeforeBody(head.request, peer: connection.peer) {
                // Refused without its body: whatever of it still comes is drained, then closed.
                stopParsing(connection)
                connection.slots[index].keepAlive = false
                connection.slots[index].outcome = .response(answer)
            } else {
                connection.slots[index].owesContinue = true
            }
            markDirty(connection)
        }
    }

    private func finishBody(_ connection: Connection) {
        connection.phase = .head
        guard let body = connection.body else { return }
        // A body whole is counted until its request is answered: a thousand of them waiting for
        // a busy session hold as much as a thousand arriving. Small ones are the connection's
        // own overhead, as its head is, so the usual request costs no shared count.
        var held = 0
        if connection.countedBodyBytes > 0 || body.bytes.count > Self.uncountedBodyBytes {
            if countBody(connection, holding: body.bytes.count) { return refuseForBodies(connection) }
            // The count goes with the request, to be given back by its responder.
            held = connection.countedBodyBytes
            connection.countedBodyBytes = 0
        }
        connection.body = nil
        var request = body.head.request
        request.body = body.bytes
        if let index = connection.slotIndex(body.sequence) {
            // The client sent the body without waiting; the interim answer is moot.
            connection.slots[index].owesContinue = false
        }
        dispatch(request, on: connection, sequence: body.sequence, countedBodyBytes: held)
    }

    /// Bodies up to this size, arriving whole, are not counted toward `maxBufferedBodies`.
    static let uncountedBodyBytes = 16 * 1024

    private func dispatch(_ request: HTTPRequest, on connection: Connection, sequence: UInt64, countedBodyBytes: Int = 0) {
        connection.state.requestDispatched()
        let responder = HTTPResponder(loop: self, connection: connection, sequence: sequence, request: request,
                                      countedBodyBytes: countedBodyBytes)
        shared.handler.handle(request, responder: responder)
        if responder.openedStream.load(ordering: .relaxed) {
            // Nothing pipelined after a stream is served.
            stopParsing(connection)
        }
    }

    /// Answers a request the server will not hand to the handler (with the handler's
    /// rendering of the refusal), then closes.
    func refuse(_ connection: Connection, _ error: ProtocolError, request: HTTPRequest? = nil, isHead: Bool = false) {
        stopParsing(connection)
        var slot = ResponseSlot(isHead: isHead || request?.method == "HEAD", keepAlive: false, isHTTP10: false)
        slot.outcome = .response(shared.response(refusing: error, request: request, peer: connection.peer))
        _ = connection.openSlot(slot)
        markDirty(connection)
    }

    /// Answers the request whose body is being read with an error, then closes.
    func refuseBody(_ connection: Connection, _ error: ProtocolError) {
        let body = connection.body
        let request = body?.head.request
        stopParsing(connection)
        guard let sequence = body?.sequence, let index = connection.slotIndex(sequence) else {
            refuse(connection, error, request: request)
            return
        }
        connection.slots[index].keepAlive = false
        connection.slots[index].owesContinue = false
        connection.slots[index].outcome = .response(shared.response(refusing: error, request: request, peer: connection.peer))
        markDirty(connection)
    }

    /// A refused head that asks for `HEAD` gets its answer without a body, as any `HEAD` does:
    /// the method is the first thing on the line, so it is known even when the rest is not.
    static func namesHEAD(_ head: UnsafeRawBufferPointer) -> Bool {
        head.starts(with: "HEAD ".utf8)
    }

    /// The head of a request refused only for its body (the length it declares, a transfer
    /// coding navd does not decode): read again without that check, so the refusal is answered
    /// and logged in context (its method and path, its origin, its request id). Any other fault
    /// is in the head itself, which then tells nothing.
    private static func refusedRequest(
        _ error: ProtocolError, _ head: UnsafeRawBufferPointer, requestLineLength: Int
    ) -> HTTPRequest? {
        guard error.kind == .payloadTooLarge || error.kind == .notImplemented,
              case .success(let parsed) = RequestHeadParser.parse(head, requestLineLength: requestLineLength, maxBodyBytes: .max,
                                                                  anyTransferCoding: true)
        else { return nil }
        return parsed.request
    }

    /// After the client's FIN, a request still being received can never complete: drop it.
    /// Complete requests still waiting their turn in `pending` are served.
    func abandonIncompleteRequest(_ connection: Connection) {
        guard connection.state.peerHasClosed, connection.isReadingBody || connection.scanner.hasStarted else { return }
        if connection.isReadingBody, let sequence = connection.body?.sequence, let index = connection.slotIndex(sequence) {
            connection.slots.removeSubrange(index...)
        }
        stopParsing(connection)
    }

    private func stopParsing(_ connection: Connection) {
        connection.state.stopAcceptingRequests()
        connection.phase = .discard
        connection.pending = []
        connection.body = nil
        connection.scanner = HeadScanner()
    }

    /// The client sent FIN (or the read failed). Requests already received are still
    /// answered if the socket allows; then the connection closes.
    func peerClosed(_ connection: Connection) {
        // A response already serialized but not yet written still goes out: afterWrite closes
        // the connection once the output has drained.
        let owesAnswers = !connection.slots.isEmpty || !connection.output.isEmpty
        guard connection.state.peerClosed(owesAnswers: owesAnswers) == .answerWhatArrived else {
            close(connection, reason: .clientClosed)
            return
        }
        abandonIncompleteRequest(connection)
        if connection.slots.isEmpty && connection.output.isEmpty {
            close(connection, reason: .clientClosed)
            return
        }
        updateInterest(connection)
    }
}
