#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Finds the end of a request head as bytes trickle in, enforcing the size limits before the
/// head is complete. Lines must end in CRLF: a bare LF is refused (400), since tolerating it
/// invites request smuggling behind proxies that read lines differently.
struct HeadScanner {
    enum Outcome {
        case incomplete
        /// The head is `length` bytes, its request line (with CRLF) `requestLineLength`.
        case complete(length: Int, requestLineLength: Int)
        case failure(ProtocolError)
    }

    /// Bytes before this index hold no unexamined line end.
    private(set) var scanned = 0
    private var lineStart = 0
    private var requestLineLength = 0

    var hasStarted: Bool { scanned > 0 }

    /// Scans `bytes`, which start at the head's first byte and grow between calls.
    mutating func scan(_ bytes: UnsafeRawBufferPointer, maxRequestLine: Int, maxHeaderBytes: Int) -> Outcome {
        guard let base = bytes.baseAddress else { return .incomplete }
        var index = scanned
        while index < bytes.count {
            guard let found = memchr(base + index, Int32(ASCII.lf), bytes.count - index) else {
                index = bytes.count
                break
            }
            let lf = base.distance(to: UnsafeRawPointer(found))
            guard lf > lineStart, bytes[lf - 1] == ASCII.cr else {
                return .failure(.badRequest("Lines must end with CRLF."))
            }
            if requestLineLength == 0 {
                if lf - 1 > maxRequestLine { return .failure(.uriTooLong) }
                requestLineLength = lf + 1
            } else {
                if lf - 1 == lineStart {
                    return .complete(length: lf + 1, requestLineLength: requestLineLength)
                }
                if lf + 1 - requestLineLength > maxHeaderBytes { return .failure(.headersTooLarge) }
            }
            lineStart = lf + 1
            index = lf + 1
        }
        scanned = index
        if requestLineLength == 0 {
            // One byte of slack for a CR whose LF has not arrived yet.
            if bytes.count > maxRequestLine + 1 { return .failure(.uriTooLong) }
        } else if bytes.count - requestLineLength > maxHeaderBytes + 1 {
            return .failure(.headersTooLarge)
        }
        return .incomplete
    }
}
