#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension EventLoop {
    /// Accepts what is waiting (bounded per wake-up) and deals connections round-robin
    /// over the loops, so a burst of connects lands evenly however the wake-ups fell. At
    /// shutdown, `draining` accepts the whole queue, whether the loop listens or not.
    func acceptConnections(draining: Bool = false) {
        guard listening || draining else { return }
        for _ in 0..<(draining ? Int.max : 64) {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    type(of: selector).accept(shared.listenFD, $0, &length)
                }
            }
            guard fd >= 0 else {
                switch errno {
                case EINTR, ECONNABORTED, EPROTO:
                    continue
                case EAGAIN, EWOULDBLOCK:
                    return
                case _ where draining:
                    return
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Level-triggered readiness would spin; rest the listener briefly.
                    stopListening()
                    listenPausedUntil = now + 100_000_000
                    return
                case EINVAL, EBADF:
                    // The listener is gone (it never is while a loop may accept: defensive).
                    stopListening()
                    return
                default:
                    // EPERM, network errors accept(2) says to retry on: this connection is lost,
                    // the listener is not. Rest briefly, in case the error repeats.
                    stopListening()
                    listenPausedUntil = now + 10_000_000
                    return
                }
            }
            let peer = PeerAddress(storage)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            var sendBuffer = settings.connectionSendBuffer
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sendBuffer, socklen_t(MemoryLayout<Int32>.size))
            if shared.stopping.load(ordering: .relaxed) {
                refuseAtAccept(fd, peer: peer, .shuttingDown)
                continue
            }
            let open = shared.openConnections.add(1, ordering: .relaxed).newValue
            if let limit = settings.maxConnections, open > limit {
                shared.openConnections.subtract(1, ordering: .relaxed)
                refuseAtAccept(fd, peer: peer, .overCapacity)
                continue
            }
            let target = peers.isEmpty ? self : peers[shared.nextLoop.add(1, ordering: .relaxed).newValue % peers.count]
            if target === self {
                adopt(fd: fd, peer: peer)
            } else {
                target.post(.adopt(fd: fd, peer: peer))
            }
        }
    }

    func adopt(fd: Int32, peer: PeerAddress) {
        guard running else {
            closeDescriptor(fd)
            shared.openConnections.subtract(1, ordering: .relaxed)
            return
        }
        guard !shuttingDown else {
            // Accepted by another loop just before the shutdown: answered like the accept queue.
            shared.openConnections.subtract(1, ordering: .relaxed)
            refuseAtAccept(fd, peer: peer, .shuttingDown)
            return
        }
        _ = register(fd: fd, peer: peer)
    }

    /// Answers a connection it will not serve at once, without reading its request (the
    /// handler writes the refusal). The connection then stays on this loop only to read and
    /// drop what the client sends until it closes or `lingerTimeout` passes: closed with
    /// unread input, the socket would reset and the client could lose the answer, or fail to
    /// send the rest of its request and never read it. Past `maxRefusingConnections` draining at
    /// once, the answer is written (after reading what already arrived) and the connection
    /// closed straight away.
    func refuseAtAccept(_ fd: Int32, peer: PeerAddress, _ error: ProtocolError) {
        guard shared.refusingConnections.add(1, ordering: .relaxed).newValue <= settings.maxRefusingConnections else {
            shared.refusingConnections.subtract(1, ordering: .relaxed)
            for _ in 0..<4 {
                guard case .transferred = SocketIO.read(fd, into: readBuffer) else { break }
            }
            let response = shared.response(refusing: error, request: nil, peer: peer)
            var bytes: [UInt8] = []
            ResponseSerializer.appendHead(
                status: response.status, headers: response.headers, contentLength: response.body.count,
                connection: .close, date: date.currentField(), to: &bytes)
            bytes.append(contentsOf: response.body)
            _ = bytes.withUnsafeBytes { SocketIO.write(fd, $0) }
            closeDescriptor(fd)
            return
        }
        refuse(register(fd: fd, peer: peer, isRefused: true), error)
    }

    /// Puts the listener back after a pause for lack of descriptors.
    func resumeListeningIfDue() {
        guard !listening, listenPausedUntil != 0, now >= listenPausedUntil, !shuttingDown, running else { return }
        listenPausedUntil = 0
        listening = true
        selector.registerListener(shared.listenFD, token: Self.listenToken)
    }
}
