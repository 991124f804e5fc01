#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension EventLoop {
    /// Accepts what is waiting (bounded per wake-up) and deals connections round-robin
    /// over the loops, so a burst of connects lands evenly however the wake-ups fell.
    func acceptConnections() {
        guard listening else { return }
        for _ in 0..<64 {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &storage) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    PlatformSelector.accept(shared.listenFD, $0, &length)
                }
            }
            guard fd >= 0 else {
                switch errno {
                case EINTR, ECONNABORTED, EPROTO:
                    continue
                case EAGAIN, EWOULDBLOCK:
                    return
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // Level-triggered readiness would spin; rest the listener briefly.
                    stopListening()
                    listenPausedUntil = now + 100_000_000
                    return
                case EINVAL, EBADF:
                    // The listener was shut down by beginShutdown.
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
            if shared.stopping.load(ordering: .relaxed) {
                closeDescriptor(fd)
                continue
            }
            let peer = PeerAddress(storage)
            let open = shared.openConnections.add(1, ordering: .relaxed).newValue
            if let limit = settings.maxConnections, open > limit {
                refuseOverCapacity(fd, peer: peer)
                shared.openConnections.subtract(1, ordering: .relaxed)
                continue
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            let target = peers.isEmpty ? self : peers[shared.nextLoop.add(1, ordering: .relaxed).newValue % peers.count]
            if target === self {
                adopt(fd: fd, peer: peer)
            } else {
                target.post(.adopt(fd: fd, peer: peer))
            }
        }
    }

    func adopt(fd: Int32, peer: PeerAddress) {
        guard !shuttingDown, running else {
            closeDescriptor(fd)
            shared.openConnections.subtract(1, ordering: .relaxed)
            return
        }
        _ = register(fd: fd, peer: peer)
    }

    /// Writes the 503 straight away without reading the request, then closes. Input that
    /// already arrived is drained first so the close does not reset the connection.
    private func refuseOverCapacity(_ fd: Int32, peer: PeerAddress) {
        for _ in 0..<4 {
            guard case .transferred = SocketIO.read(fd, into: readBuffer) else { break }
        }
        var bytes: [UInt8] = []
        let response = shared.response(refusing: .overCapacity, request: nil, peer: peer)
        ResponseSerializer.appendHead(
            status: response.status, headers: response.headers, contentLength: response.body.count,
            connection: .close, to: &bytes)
        bytes.append(contentsOf: response.body)
        _ = bytes.withUnsafeBytes { SocketIO.write(fd, $0) }
        shutdown(fd, Int32(SHUT_WR))
        closeDescriptor(fd)
    }

    /// Puts the listener back after a pause for lack of descriptors.
    func resumeListeningIfDue() {
        guard !listening, listenPausedUntil != 0, now >= listenPausedUntil, !shuttingDown, running else { return }
        listenPausedUntil = 0
        listening = true
        selector.registerListener(shared.listenFD, token: Self.listenToken)
    }
}
