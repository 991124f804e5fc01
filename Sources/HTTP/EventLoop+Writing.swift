#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension EventLoop {
    func deliver(_ response: HTTPResponse, to connection: Connection, sequence: UInt64) {
        guard !connection.state.isClosed, let index = connection.slotIndex(sequence),
              connection.slots[index].outcome == nil else { return }
        connection.slots[index].outcome = .response(response)
        if index == 0 { markDirty(connection) }
    }

    func deliver(_ stream: EventStream, headers: HTTPHeaders, to connection: Connection, sequence: UInt64) {
        guard !connection.state.isClosed, let index = connection.slotIndex(sequence),
              connection.slots[index].outcome == nil else {
            stream.finish(connection.state.isClosed ? .clientClosed : .closedByServer)
            return
        }
        connection.slots[index].outcome = .stream(stream, headers)
        if index == 0 { markDirty(connection) }
    }

    /// Serializes the responses that are next in line, writes what the socket takes and
    /// queues the rest for EPOLLOUT. Small responses are built in the loop's scratch buffer
    /// and cost the connection nothing once written.
    func flush(_ connection: Connection) {
        guard !connection.state.isClosed, !connection.state.isLingering else { return }
        writeBuffer.removeAll(keepingCapacity: true)
        serializeReadySlots(connection)

        if connection.output.isEmpty && !writeBuffer.isEmpty {
            let outcome = writeBuffer.withUnsafeBytes { SocketIO.write(connection.fd, $0) }
            switch outcome {
            case .transferred(let count):
                connection.madeWriteProgress(now)
                if count < writeBuffer.count { connection.output.append(Self.exactCopy(writeBuffer[count...])) }
            case .wouldBlock:
                connection.output.append(Self.exactCopy(writeBuffer[...]))
            case .closed:
                close(connection, reason: .clientClosed)
                return
            }
        } else {
            if !writeBuffer.isEmpty { connection.output.append(Self.exactCopy(writeBuffer[...])) }
            guard writeQueued(connection) else { return }
        }
        writeBuffer.removeAll(keepingCapacity: true)
        afterWrite(connection)
    }

    /// Moves ready responses at the front of the pipeline into `writeBuffer` (large bodies
    /// go to the output queue by reference, after what was staged).
    private func serializeReadySlots(_ connection: Connection) {
        while let slot = connection.slots.first, !connection.state.endsAfterOutput, connection.state.stream == nil {
            if slot.owesContinue {
                ASCII.append(ResponseSerializer.continueBytes, to: &writeBuffer)
                connection.slots[0].owesContinue = false
            }
            guard let outcome = slot.outcome else { return }
            connection.slots.removeFirst()
            connection.firstSequence += 1
            switch outcome {
            case .response(let response):
                serialize(response, slot: slot, connection: connection)
            case .stream(let stream, let headers):
                // No length and no chunks: the stream ends with the connection, as the head says.
                ResponseSerializer.appendHead(
                    status: 200, headers: headers, contentLength: nil, connection: .close,
                    isEventStream: true, date: date.currentField(), to: &writeBuffer)
                // A HEAD request gets the head only.
                connection.state.streamStarted(stream, headOnly: slot.isHead)
                var sendBuffer = settings.streamSendBuffer
                setsockopt(connection.fd, SOL_SOCKET, SO_SNDBUF, &sendBuffer, socklen_t(MemoryLayout<Int32>.size))
                connection.phase = .discard
                connection.pending = []
                dropRemainingSlots(connection)
            }
        }
    }

    private func serialize(_ original: HTTPResponse, slot: ResponseSlot, connection: Connection) {
        var response = original
        if response.status < 200 || response.status > 999 {
            response = shared.response(
                refusing: .internalError("The handler answered with an invalid status."), request: nil, peer: connection.peer)
        }
        let closing = !slot.keepAlive
            || (shuttingDown && connection.slots.isEmpty)
            || ResponseSerializer.requestsClose(response.headers)
        let noBody = ResponseSerializer.forbidsBody(response.status)
        ResponseSerializer.appendHead(
            status: response.status,
            headers: response.headers,
            contentLength: noBody || response.describesEventStream ? nil : response.body.count,
            connection: closing ? .close : (slot.isHTTP10 ? .keepAlive : .none),
            isEventStream: response.describesEventStream,
            date: date.currentField(),
            to: &writeBuffer)
        if !noBody && !slot.isHead && !response.body.isEmpty {
            if response.body.count <= 64 * 1024 {
                writeBuffer.append(contentsOf: response.body)
            } else {
                connection.output.append(Self.exactCopy(writeBuffer[...]))
                writeBuffer.removeAll(keepingCapacity: true)
                connection.output.append(response.body)
            }
        }
        if closing {
            connection.state.lastAnswerQueued()
            connection.phase = .discard
            connection.pending = []
            dropRemainingSlots(connection)
        }
    }

    /// A fresh array of just these bytes: never a share of the loop's 64 KiB scratch buffer,
    /// which would pin that much memory per waiting connection.
    static func exactCopy(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
        bytes.withUnsafeBufferPointer { Array($0) }
    }

    /// Forgets requests after one that ends the connection; their answers will be ignored.
    private func dropRemainingSlots(_ connection: Connection) {
        for slot in connection.slots {
            if case .stream(let stream, _)? = slot.outcome { stream.finish(.closedByServer) }
        }
        connection.firstSequence += UInt64(connection.slots.count)
        connection.slots = []
    }

    /// Bytes one connection may write per wake-up. Past it the connection waits for its next
    /// (level-triggered) writable report like one whose socket is full, so the other ready
    /// connections on the loop are served in between: a fast reader of a busy stream or of a
    /// large body cannot hold the loop.
    static let writeBudget = 256 * 1024

    /// How a run of gathered writes ended.
    enum GatheredWrite {
        /// The source has nothing left to write.
        case drained
        /// The socket is full or the write budget is spent: wait for the next writable report.
        case blocked
        /// The peer is gone.
        case failed
    }

    /// The one gathered-write loop: chunk references from `take` (which fills the scratch list and
    /// returns the offset into its first chunk) go out in one `sendmsg` each until the source is
    /// empty, the socket is full or the write budget is spent; `consume` is told what went out.
    private func writeGathered(
        _ connection: Connection,
        take: (inout [[UInt8]]) -> Int,
        consume: (Int) -> Void
    ) -> GatheredWrite {
        var written = 0
        while written < Self.writeBudget {
            let offset = take(&chunkScratch)
            if chunkScratch.isEmpty { return .drained }
            let total = chunkScratch.reduce(0) { $0 + $1.count } - offset
            let outcome = SocketIO.write(connection.fd, chunkScratch, firstOffset: offset, iovecs: iovecs)
            chunkScratch.removeAll(keepingCapacity: true)
            switch outcome {
            case .transferred(let count):
                connection.madeWriteProgress(now)
                consume(count)
                written += count
                // A short write means the socket is full.
                if count < total { return .blocked }
            case .wouldBlock:
                return .blocked
            case .closed:
                return .failed
            }
        }
        return .blocked
    }

    /// Writes the output queue, within the write budget; false if the connection was closed.
    private func writeQueued(_ connection: Connection) -> Bool {
        let result = writeGathered(connection, take: { connection.output.peek(into: &$0, limit: Self.maxIOVecs) },
                                   consume: { connection.output.consume($0) })
        guard result != .failed else {
            close(connection, reason: .clientClosed)
            return false
        }
        return true
    }

    /// What follows a write: closing, streaming, reading on, or waiting for EPOLLOUT.
    private func afterWrite(_ connection: Connection) {
        if connection.output.isEmpty {
            let (next, endedStream) = connection.state.outputDrained()
            switch next {
            case .linger:
                endedStream?.finish(.closedByServer)
                beginLinger(connection)
                return
            case .writeStream:
                flushStream(connection)
                return
            case .readOn:
                break
            }
            if shuttingDown && connection.isIdle && !connection.isReadingBody {
                beginLinger(connection)
                return
            }
            if connection.slots.isEmpty && connection.pending.isEmpty && !connection.scanner.hasStarted {
                connection.phaseStart = now
            }
        }
        // The next pipelined request starts once this answer is out of the way.
        if !connection.pending.isEmpty && connection.canStartRequest(settings) {
            parsePending(connection)
            abandonIncompleteRequest(connection)
        }
        if connection.state.peerHasClosed && connection.slots.isEmpty && connection.output.isEmpty {
            close(connection, reason: .clientClosed)
            return
        }
        updateInterest(connection)
    }

    /// Writes queued stream bytes straight from the shared arrays, within the write budget;
    /// closes the stream when the application asked and everything went out, or at once when
    /// it is too slow.
    func flushStream(_ connection: Connection) {
        guard let stream = connection.state.stream else { return }
        guard connection.output.isEmpty else {
            // The response head itself is still waiting for the socket.
            switch stream.requestedClose {
            case .tooSlow?: close(connection, reason: .tooSlow)
            case .some: connection.state.streamCloseWaits(now: now)
            case nil: break
            }
            return
        }
        var requestedClose: EventStreamCloseReason?
        let result = writeGathered(connection, take: { chunks in
            let (offset, requested) = stream.takeChunks(into: &chunks, limit: Self.maxIOVecs)
            requestedClose = requested
            // A stream that fell too far behind has had its queue dropped: nothing more goes out.
            if requested == .tooSlow { chunks.removeAll(keepingCapacity: true) }
            return offset
        }, consume: { stream.consume($0) })
        switch result {
        case .failed:
            close(connection, reason: .clientClosed)
            return
        case .blocked:
            connection.state.streamWrote(blocked: true)
        case .drained:
            connection.state.streamWrote(blocked: false)
            if let requestedClose {
                close(connection, reason: requestedClose == .tooSlow ? .tooSlow : .closedByServer)
                return
            }
        }
        if connection.state.isStreamBlocked, stream.requestedClose != nil {
            connection.state.streamCloseWaits(now: now)
        }
        updateInterest(connection)
    }

    /// Keeps the selector's interest in line with what the connection waits for.
    func updateInterest(_ connection: Connection) {
        guard !connection.state.isClosed else { return }
        var wanted: Interest = []
        if connection.state.isLingering {
            wanted = .readable
        } else if connection.state.stream != nil {
            wanted = connection.state.isStreamBlocked || !connection.output.isEmpty ? [.readable, .writable] : .readable
        } else {
            // While a request is handled, later input is buffered up to a bound, then left unread.
            let wantsInput = !connection.state.peerHasClosed && (connection.isReadingBody
                || (connection.state.acceptsRequests
                    && (connection.slots.isEmpty || connection.pending.count < settings.maxBufferedInput)
                    && connection.output.count < settings.outputHighWater))
            if wantsInput { wanted.insert(.readable) }
            if !connection.output.isEmpty { wanted.insert(.writable) }
        }
        guard wanted != connection.interest else { return }
        connection.interest = wanted
        selector.reregister(connection.fd, interest: wanted, token: connection.token)
    }
}
