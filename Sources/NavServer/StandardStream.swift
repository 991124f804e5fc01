#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTP

/// stdout and stderr, written with write(2): all of the bytes, retried after a signal or a short
/// write. A closed stream (navd ignores SIGPIPE) loses them and nothing else.
public enum StandardStream: Int32, Sendable {
    /// Standard output: log lines.
    case output = 1
    /// Standard error: what a person must read (bad flags, a store that cannot open).
    case error = 2

    /// Writes all of `bytes`.
    public func write(_ bytes: [UInt8]) {
        var offset = 0
        bytes.withUnsafeBytes { buffer in
            while offset < buffer.count {
                let written = writeDescriptor(rawValue, buffer.baseAddress.map { $0 + offset }, buffer.count - offset)
                if written > 0 {
                    offset += written
                } else if written < 0, errno == EINTR {
                    continue
                } else {
                    return
                }
            }
        }
    }

    /// `line` and a newline.
    public func writeLine(_ line: String) {
        write(Array(line.utf8) + [0x0A])
    }
}
