#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension EventLoop {
    /// Closes the socket at once and lets go of everything the connection held.
    func close(_ connection: Connection, reason: EventStreamCloseReason) {
        let stream = connection.state.stream
        guard connection.state.close() else { return }
        if reason == .tooSlow {
            // Reset rather than a FIN queued behind bytes the client will not read: the kernel
            // frees them at once instead of keeping an orphaned socket for minutes.
            var reset = linger(l_onoff: 1, l_linger: 0)
            setsockopt(connection.fd, SOL_SOCKET, SO_LINGER, &reset, socklen_t(MemoryLayout<linger>.size))
        }
        selector.closeWatched(connection.fd)
        let index = Int(connection.fd)
        if index < connections.count, connections[index] === connection { connections[index] = nil }
        if connection.refusedAtDeadline { shared.refusedAtDeadline.subtract(1, ordering: .relaxed) }
        if connection.isRefused {
            shared.refusingConnections.subtract(1, ordering: .relaxed)
        } else {
            shared.openConnections.subtract(1, ordering: .relaxed)
        }
        connection.pending = []
        connection.body = nil
        countBody(connection)
        connection.output.removeAll()
        for slot in connection.slots {
            if case .stream(let stream, _)? = slot.outcome { stream.finish(reason) }
        }
        connection.slots = []
        stream?.finish(reason)
    }

    /// Sends FIN after the last response but keeps reading (and dropping) for a moment, so
    /// unread client bytes do not make the kernel reset the connection and lose the response.
    func beginLinger(_ connection: Connection) {
        switch connection.state.beginLinger(now: now, enabled: settings.lingerTimeout > 0) {
        case .nothing: return
        case .close: return close(connection, reason: .clientClosed)
        case .shutDownWriting: break
        }
        connection.pending = []
        connection.body = nil
        connection.slots = []
        shutdown(connection.fd, Int32(SHUT_WR))
        updateInterest(connection)
    }

    /// Enforces the timeouts; run every `sweepInterval`. Counts what waits for this loop's
    /// clients on the way, for the server-wide bound (`maxBufferedOutput`), which the count of
    /// the sweeps before decides. (Bodies are counted as they arrive: see `countBody`.)
    func sweep() {
        resumeListeningIfDue()
        let pressed = settings.maxBufferedOutput.map { shared.bufferedOutput.load(ordering: .relaxed) > $0 } ?? false
        // A refusal for the bound presses for four sweeps (a second by default, the refused
        // client's `Retry-After`): long enough for a body that had stopped arriving by then to be
        // found stalled.
        let refusals = shared.bodyRefusals.load(ordering: .relaxed)
        bodyPressureSweeps = refusals != seenBodyRefusals ? 4 : max(0, bodyPressureSweeps - 1)
        seenBodyRefusals = refusals
        let bodiesPressed = bodyPressureSweeps > 0
            || settings.maxBufferedBodies.map { shared.bufferedBodies.load(ordering: .relaxed) > $0 } ?? false
        var waiting = 0
        var index = 0
        while index < connections.count {
            if let connection = connections[index] {
                // A body dropped on a path that did not count it (the client's FIN) is let go here.
                countBody(connection)
                waiting += checkTimeouts(connection, pressed: pressed, bodiesPressed: bodiesPressed)
            }
            index += 1
        }
        if settings.maxBufferedOutput != nil, waiting != countedOutput {
            shared.bufferedOutput.add(waiting - countedOutput, ordering: .relaxed)
            countedOutput = waiting
        }
    }

    /// Closes or refuses `connection` if a timeout ran out; returns the bytes waiting for its
    /// client.
    private func checkTimeouts(_ connection: Connection, pressed: Bool, bodiesPressed: Bool) -> Int {
        // The stream's queue is behind a lock: read only when the too-slow rule can look at it.
        // Not waiting, a stream's queue is empty or about to be written.
        let waiting = connection.state.isStreamBlocked || !connection.output.isEmpty
        let streamQueuedBytes = waiting ? connection.state.stream?.queuedByteCount ?? 0 : 0
        // Only where a stall ends the connection: an ordinary answer, a stream over its limit, or
        // any stream behind while the server's clients are over their bound together.
        if waiting && (connection.state.stream == nil || pressed || streamQueuedBytes > settings.streamBufferLimit) {
            noteClientProgress(connection)
        }
        let activity = ConnectionState.Activity(
            elapsedInPhase: now - connection.phaseStart,
            sinceWriteProgress: now - connection.lastWriteProgress,
            outputPending: !connection.output.isEmpty,
            outputBytes: connection.output.count,
            unansweredRequests: !connection.slots.isEmpty,
            readPhase: connection.phase,
            receivingHead: connection.scanner.hasStarted || !connection.pending.isEmpty,
            canStartRequest: connection.canStartRequest(settings),
            streamQueuedBytes: streamQueuedBytes,
            outputPressed: pressed,
            sinceReadProgress: now - connection.lastReadProgress,
            bodiesPressed: bodiesPressed)
        switch connection.state.expired(activity, now: now, settings: settings) {
        case nil: return connection.output.count + streamQueuedBytes
        case .close(let reason): close(connection, reason: reason)
        case .refuseHead: refuse(connection, .requestTimeout, isHead: connection.pending.withUnsafeBytes(Self.namesHEAD))
        case .refuseBody:
            refuseBody(connection, .requestTimeout)
            countBody(connection)
        }
        return 0
    }

    /// A client that reads slowly frees its socket's buffer a little at a time, and Linux
    /// signals room only once a good share of it is free: without a look at the socket, a
    /// client that reads would count as one that has stopped. It counts as reading once it has
    /// taken `LoopSettings.minimumProgressBytes`, so one that trickles a few bytes cannot hold
    /// what waits for it for hours. Looked at only once a connection has waited a sweep or
    /// more, so a client that keeps up costs no system call.
    private func noteClientProgress(_ connection: Connection) {
        guard now - connection.lastWriteProgress > settings.sweepInterval,
              let unacknowledged = unacknowledgedBytes(connection.fd) else { return }
        guard let since = connection.unacknowledgedSinceProgress else {
            connection.unacknowledgedSinceProgress = unacknowledged
            return
        }
        if since - unacknowledged >= settings.minimumProgressBytes {
            connection.madeWriteProgress(now)
            connection.unacknowledgedSinceProgress = unacknowledged
        }
    }

    /// Stops accepting, closes idle connections and lets the others finish their requests.
    /// Event streams stay open. Connections waiting in the accept queue are accepted and
    /// answered 503 first, then this loop lets go of the listener.
    func beginShutdown() {
        guard !shuttingDown else { return }
        shuttingDown = true
        acceptConnections(draining: true)
        stopListening()
        shared.releaseListener()
        for index in connections.indices {
            guard let connection = connections[index], !connection.state.isClosed,
                  connection.state.stream == nil, !connection.state.isLingering else { continue }
            let quiet = connection.slots.isEmpty && connection.output.isEmpty && !connection.isReadingBody
            if connection.slots.isEmpty && connection.isReceivingHead {
                // Part of a head, even behind an answer still being written: a request the
                // drain will not serve, answered as one waiting in the accept queue is.
                refuseUnservedHead(connection)
            } else if quiet && hasUnreadInput(connection.fd) {
                // Sent before the stop but not read yet (a busy loop reads a turn late): left
                // for its turn (`readable`), since a close over unread bytes resets the
                // connection and its client would get no answer at all.
            } else if quiet {
                close(connection, reason: .shutdown)
            } else {
                connection.state.stopAcceptingRequests()
                markDirty(connection)
            }
        }
    }

    /// During the drain, what a connection left open for its unread input turned out to be: a
    /// whole request is served (its answer closes), part of a head is refused, anything else
    /// (blank lines) ends the connection.
    func afterReadWhileDraining(_ connection: Connection) {
        guard connection.isIdle, !connection.state.isClosed else { return }
        if connection.isReceivingHead {
            refuseUnservedHead(connection)
        } else {
            close(connection, reason: .shutdown)
        }
    }

    private func refuseUnservedHead(_ connection: Connection) {
        refuse(connection, .shuttingDown, isHead: connection.pending.withUnsafeBytes(Self.namesHEAD))
    }

    /// At the drain's deadline: a body still arriving gets `503` and a clean close, so its
    /// client knows nothing of it happened; a request the handler holds is left to the stop,
    /// since it may have taken effect. (Heads still arriving were refused when the drain began.)
    func refuseUnfinishedRequests() {
        for index in connections.indices {
            guard let connection = connections[index], !connection.state.isClosed, connection.isReadingBody,
                  connection.state.stream == nil, !connection.state.isLingering else { continue }
            connection.refusedAtDeadline = true
            shared.refusedAtDeadline.add(1, ordering: .relaxed)
            refuseBody(connection, .shuttingDown)
            countBody(connection)
        }
        shared.loopsRefusingUnfinished.subtract(1, ordering: .releasing)
    }
}
