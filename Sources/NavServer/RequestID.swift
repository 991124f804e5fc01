import Synchronization

/// The id that ties a request's log line to what its client saw: the client's own
/// `X-Request-ID` when it is a valid one, else one made here. Sent back on every answer.
enum RequestID {
    static let header = "X-Request-ID"
    /// Long enough for a UUID, a W3C trace id or a base64 digest; short enough for a log line.
    static let maxLength = 128

    /// The incoming id if it is valid; otherwise a fresh one. A bad id is replaced, never
    /// refused: a tracing header must not make a request fail.
    static func of(_ incoming: String?) -> String {
        if let incoming, isValid(incoming) { return incoming }
        return generate()
    }

    /// 1 to 128 characters, each a letter, a digit or one of `-_.:+/=`: everything a proxy or a
    /// tracer commonly sends, and nothing that needs escaping in a header or a log line.
    static func isValid(_ id: String) -> Bool {
        let bytes = id.utf8
        guard !bytes.isEmpty, bytes.count <= maxLength else { return false }
        return bytes.allSatisfy(isAllowed)
    }

    private static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            true
        case UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: ":"),
             UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="):
            true
        default:
            false
        }
    }

    /// 32 hex digits: 64 random bits chosen once per process, then a 64-bit counter. Unique
    /// within a process and, in practice, across processes, without a system call per request.
    static func generate() -> String {
        let sequence = counter.add(1, ordering: .relaxed).newValue
        return String(unsafeUninitializedCapacity: 32) { buffer in
            _ = buffer.initialize(fromContentsOf: prefix)
            writeHex(sequence, into: UnsafeMutableBufferPointer(rebasing: buffer[16...]))
            return 32
        }
    }

    private static let counter = Atomic<UInt64>(0)
    private static let prefix: [UInt8] = {
        var generator = SystemRandomNumberGenerator()
        var out = [UInt8](repeating: 0, count: 16)
        out.withUnsafeMutableBufferPointer { writeHex(generator.next(), into: $0) }
        return out
    }()

    /// 16 lower-case hex digits of `value` into the first 16 bytes of `out`.
    private static func writeHex(_ value: UInt64, into out: UnsafeMutableBufferPointer<UInt8>) {
        for index in 0..<16 {
            let digit = UInt8((value >> UInt64(60 - 4 * index)) & 0xF)
            out[index] = digit < 10 ? UInt8(ascii: "0") + digit : UInt8(ascii: "a") + digit - 10
        }
    }
}
