#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Non-blocking socket reads and writes. Every write passes `sendFlags` so a vanished peer
/// yields EPIPE instead of SIGPIPE, with no signal handler installed.
enum SocketIO {
    enum Outcome: Equatable {
        /// Some bytes moved (never zero for a read; a read of zero is `.closed`).
        case transferred(Int)
        case wouldBlock
        case closed
    }

    static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Outcome {
        while true {
            let count = receive(fd, buffer.baseAddress, buffer.count)
            if count > 0 { return .transferred(count) }
            if count == 0 { return .closed }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            default: return .closed
            }
        }
    }

    static func write(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) -> Outcome {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return .transferred(0) }
        while true {
            let count = sendBytes(fd, base, bytes.count)
            if count >= 0 { return .transferred(count) }
            switch errno {
            case EINTR: continue
            case EAGAIN, EWOULDBLOCK: return .wouldBlock
            default: return .closed
            }
        }
    }

    /// Writes the chunks in one gathering call, skipping `firstOffset` bytes of the first.
    /// `iovecs` must have room for `chunks.count` entries.
    static func write(
        _ fd: Int32, _ chunks: [[UInt8]], firstOffset: Int, iovecs: UnsafeMutablePointer<iovec>
    ) -> Outcome {
        func gather(_ index: Int, _ filled: Int) -> Outcome {
            guard index < chunks.count else {
                guard filled > 0 else { return .transferred(0) }
                while true {
                    let count = sendGathered(fd, iovecs, count: filled)
                    if count >= 0 { return .transferred(count) }
                    switch errno {
                    case EINTR: continue
                    case EAGAIN, EWOULDBLOCK: return .wouldBlock
                    default: return .closed
                    }
                }
            }
            return chunks[index].withUnsafeBytes { raw in
                let skip = index == 0 ? firstOffset : 0
                guard let base = raw.baseAddress, raw.count > skip else { return gather(index + 1, filled) }
                iovecs[filled] = iovec(iov_base: UnsafeMutableRawPointer(mutating: base + skip), iov_len: raw.count - skip)
                return gather(index + 1, filled + 1)
            }
        }
        return gather(0, 0)
    }
}
