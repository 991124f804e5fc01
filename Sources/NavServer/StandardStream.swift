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

    /// Writes as much of `bytes` as the stream takes by `deadline`, retrying after a signal or a
    /// short write. Past a full pipe, waits for room in pieces the system writes whole once
    /// there is room (`PIPE_BUF`), so no write blocks past the deadline; a file takes all at once.
    public func write(_ bytes: [UInt8], by deadline: ContinuousClock.Instant) -> Written {
        var info = stat()
        let isFile = fstat(rawValue, &info) == 0 && info.st_mode & S_IFMT == S_IFREG
        var offset = 0
        return bytes.withUnsafeBytes { buffer -> Written in
            while offset < buffer.count {
                if !isFile {
                    var ready = pollfd(fd: rawValue, events: Int16(POLLOUT), revents: 0)
                    let left = ContinuousClock.now.duration(to: deadline)
                    let milliseconds = left <= .zero ? 0 : Int32(min(left / .milliseconds(1), 60_000).rounded(.up))
                    let polled = poll(&ready, 1, milliseconds)
                    if polled < 0 && errno == EINTR { continue }
                    if polled == 0 { return Written(count: offset, isClosed: false) }
                    if polled < 0 || ready.revents & Int16(POLLNVAL) != 0 { return Written(count: offset, isClosed: true) }
                }
                let piece = isFile ? buffer.count - offset : min(buffer.count - offset, Int(PIPE_BUF))
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

    /// `line` and a newline, given `time` at most.
    public func writeLine(_ line: String, within time: Duration = .seconds(1)) {
        _ = write(Array(line.utf8) + [0x0A], by: .now + time)
    }
}
