#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension EventLoop {
    /// Closes the socket at once and lets go of everything the connection held.
    func close(_ connection: Connection, reason: EventStreamCloseReason) {
        guard !connection.isClosed else { return }
        connection.isClosed = true
        if reason == .tooSlow {
            // Reset rather than a FIN queued behind bytes the client will not read: the kernel
            // frees them at once instead of keeping an orphaned socket for minutes.
            var reset = linger(l_onoff: 1, l_linger: 0)
            setsockopt(connection.fd, SOL_SOCKET, SO_LINGER, &reset, socklen_t(MemoryLayout<linger>.size))
        }
        // Closing the descriptor also removes it from the selector (epoll forgets closed descriptors).
        closeDescriptor(connection.fd)
        let index = Int(connection.fd)
        if index < connections.count, connections[index] === connection { connections[index] = nil }
        if connection.isRefused {
            shared.refusingConnections.subtract(1, ordering: .relaxed)
        } else {
            shared.openConnections.subtract(1, ordering: .relaxed)
        }
        connection.pending = []
        connection.body = []
        connection.bodyHead = nil
        connection.output.removeAll()
        for slot in connection.slots {
            if case .stream(let stream, _)? = slot.outcome { stream.finish(reason) }
        }
        connection.slots = []
        if let stream = connection.stream {
            connection.stream = nil
            stream.finish(reason)
        }
    }

    /// Sends FIN after the last response but keeps reading (and dropping) for a moment, so
    /// unread client bytes do not make the kernel reset the connection and lose the response.
    func beginLinger(_ connection: Connection) {
        guard !connection.isClosed else { return }
        if connection.peerClosed || settings.lingerTimeout == 0 {
            close(connection, reason: .clientClosed)
            return
        }
        connection.lingering = true
        connection.phaseStart = now
        connection.pending = []
        connection.body = []
        connection.slots = []
        shutdown(connection.fd, Int32(SHUT_WR))
        updateInterest(connection)
    }

    /// Enforces the timeouts; run every `sweepInterval`.
    func sweep() {
        resumeListeningIfDue()
        var index = 0
        while index < connections.count {
            if let connection = connections[index] { checkTimeouts(connection) }
            index += 1
        }
    }

    private func checkTimeouts(_ connection: Connection) {
        let elapsed = now - connection.phaseStart
        if connection.lingering {
            if elapsed > settings.lingerTimeout { close(connection, reason: .clientClosed) }
            return
        }
        if let stream = connection.stream {
            if connection.streamCloseStart != 0 && now - connection.streamCloseStart > settings.streamCloseTimeout {
                close(connection, reason: .closedByServer)
            } else if connection.streamBlocked || !connection.output.isEmpty,
                      now - connection.lastWriteProgress > settings.streamStallTimeout,
                      stream.queuedByteCount > settings.streamBufferLimit {
                // Only a first message can put a stream over its limit; it is not being read.
                close(connection, reason: .tooSlow)
            }
            return
        }
        if !connection.output.isEmpty, now - connection.lastWriteProgress > settings.idleTimeout {
            // The client leaves a response unread.
            close(connection, reason: .clientClosed)
            return
        }
        switch connection.phase {
        case .head:
            let receivingHead = connection.scanner.hasStarted || !connection.pending.isEmpty
            if receivingHead && connection.canStartRequest(settings) {
                if elapsed > settings.headerTimeout { refuse(connection, .requestTimeout) }
            } else if connection.slots.isEmpty {
                let limit = connection.hasServedRequest ? settings.idleTimeout : settings.headerTimeout
                if elapsed > limit { close(connection, reason: .clientClosed) }
            }
        case .fixedBody, .chunkedBody:
            if elapsed > settings.bodyTimeout { refuseBody(connection, .requestTimeout) }
        case .discard:
            break
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
            guard let connection = connections[index], !connection.isClosed,
                  connection.stream == nil, !connection.lingering else { continue }
            connection.acceptsRequests = false
            if connection.slots.isEmpty && connection.output.isEmpty && !connection.isReadingBody {
                // Idle, or only part of a head that will not be served now.
                close(connection, reason: .shutdown)
            } else {
                markDirty(connection)
            }
        }
    }
}
