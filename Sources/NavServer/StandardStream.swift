#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTP

/// stdout and stderr, written with write(2) and never waited on past a deadline: whoever reads
/// them (a terminal, a log shipper, a pipe nobody drains) must not hold up a shutdown or a
/// thread of the server's. A closed stream (navd ignores SIGPIPE) loses what is written to it
/// and nothing else.
public enum StandardStream: Int32, Sendable {
    /// Standard output: log lines.
    case output = 1
    /// Standard error: what a person must read (bad flags, a store that cannot open).
    case error = 2

    /// What became of a write.
    public struct Written: Sendable, Equatable {
        /// Bytes the stream took, from the start.
        public var count: Int
        /// The stream is gone for good (its reader closed it, or it was never open): the rest
        /// can only be lost.
        public var isClosed: Bool
    }

    /// Writes as much of `bytes` as the stream takes until `deadline()`, retrying after a signal
    /// or a short write; the deadline is asked again every 50 ms of waiting, so it may come
    /// closer (a stop) while a write waits. Past a full pipe, waits for room and writes pieces
    /// of at most `PIPE_BUF`, which a pipe takes whole or not at all, cut after a newline where
    /// there is one: a reader never finds half a line that the rest of will not follow. A file
    /// takes all at once.
    public func write(_ bytes: ArraySlice<UInt8>, until deadline: () -> ContinuousClock.Instant) -> Written {
        var info = stat()
        let isFile = fstat(rawValue, &info) == 0 && info.st_mode & S_IFMT == S_IFREG
        var offset = 0
        return bytes.withUnsafeBytes { buffer -> Written in
            while offset < buffer.count {
                if !isFile {
                    var ready = pollfd(fd: rawValue, events: Int16(POLLOUT), revents: 0)
                    let left = ContinuousClock.now.duration(to: deadline())
                    let milliseconds = left <= .zero ? 0 : Int32(min(left / .milliseconds(1), 50).rounded(.up))
                    let polled = poll(&ready, 1, milliseconds)
                    if polled < 0 && errno == EINTR { continue }
                    if polled == 0 {
                        if milliseconds == 0 { return Written(count: offset, isClosed: false) }
                        continue
                    }
                    if polled < 0 || ready.revents & Int16(POLLNVAL) != 0 { return Written(count: offset, isClosed: true) }
                }
                let piece = isFile ? buffer.count - offset : Self.piece(buffer, from: offset)
                let written = writeDescriptor(rawValue, buffer.baseAddress.map { $0 + offset }, piece)
                if written > 0 {
                    offset += written
                    continue
                }
                let failure = written < 0 ? errno : 0
                if failure == EINTR { continue }
                // A full disk, an I/O error, a descriptor another process made non-blocking:
                // perhaps later. A reader that went away, or no stream at all: never.
                return Written(count: offset, isClosed: failure == EPIPE || failure == EBADF)
            }
            return Written(count: offset, isClosed: false)
        }
    }

    /// At most `PIPE_BUF` bytes from `offset`, ending after the last newline among them if any.
    private static func piece(_ buffer: UnsafeRawBufferPointer, from offset: Int) -> Int {
        let most = min(buffer.count - offset, Int(PIPE_BUF))
        guard offset + most < buffer.count else { return most }
        var end = offset + most
        while end > offset && buffer[end - 1] != 0x0A { end -= 1 }
        return end > offset ? end - offset : most
    }

    /// `line` and a newline, given `time` at most.
    public func writeLine(_ line: String, within time: Duration = .seconds(1)) {
        let deadline = ContinuousClock.now + time
        _ = write(ArraySlice(Array(line.utf8) + [0x0A]), until: { deadline })
    }
}
