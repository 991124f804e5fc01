/// Byte-level helpers for the HTTP grammar, so parsing never goes through `String`.
package enum ASCII {
    static let tab: UInt8 = 0x09
    static let lf: UInt8 = 0x0A
    static let cr: UInt8 = 0x0D
    static let space: UInt8 = 0x20
    static let percent: UInt8 = 0x25
    static let ampersand: UInt8 = 0x26
    static let plus: UInt8 = 0x2B
    static let comma: UInt8 = 0x2C
    static let slash: UInt8 = 0x2F
    static let colon: UInt8 = 0x3A
    static let semicolon: UInt8 = 0x3B
    static let equals: UInt8 = 0x3D
    static let question: UInt8 = 0x3F
    static let asterisk: UInt8 = 0x2A

    /// RFC 9110 `tchar`: the characters allowed in methods and field names.
    package static func isTokenCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: true
        case 0x21, 0x23, 0x24, 0x25, 0x26, 0x27, 0x2A, 0x2B, 0x2D, 0x2E, 0x5E, 0x5F, 0x60, 0x7C, 0x7E: true
        default: false
        }
    }

    package static func isWhitespace(_ byte: UInt8) -> Bool { byte == space || byte == tab }

    package static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }

    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }

    /// Whether `bytes` equal `lowercaseLiteral` ignoring ASCII case.
    static func equalsIgnoringCase(_ bytes: UnsafeRawBufferPointer, _ lowercaseLiteral: StaticString) -> Bool {
        guard bytes.count == lowercaseLiteral.utf8CodeUnitCount else { return false }
        return lowercaseLiteral.withUTF8Buffer { literal in
            for index in 0..<literal.count where lowercased(bytes[index]) != literal[index] {
                return false
            }
            return true
        }
    }

    /// Case-insensitive comparison of two header names.
    package static func namesEqual(_ left: String, _ right: String) -> Bool {
        guard left.utf8.count == right.utf8.count else { return false }
        var leftBytes = left.utf8.makeIterator()
        var rightBytes = right.utf8.makeIterator()
        while let a = leftBytes.next(), let b = rightBytes.next() {
            if a != b && lowercased(a) != lowercased(b) { return false }
        }
        return true
    }

    /// `bytes` without leading and trailing spaces and tabs.
    static func trimmed(_ bytes: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        var start = 0
        var end = bytes.count
        while start < end && isWhitespace(bytes[start]) { start += 1 }
        while end > start && isWhitespace(bytes[end - 1]) { end -= 1 }
        return UnsafeRawBufferPointer(rebasing: bytes[start..<end])
    }

    /// Appends the literal's bytes.
    static func append(_ literal: StaticString, to out: inout [UInt8]) {
        literal.withUTF8Buffer { out.append(contentsOf: $0) }
    }

    /// Appends a non-negative integer in decimal.
    static func appendDecimal(_ value: Int, to out: inout [UInt8]) {
        guard value > 0 else {
            out.append(0x30)
            return
        }
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)
        var remaining = value
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while remaining > 0 {
                buffer[23 - count] = UInt8(0x30 + remaining % 10)
                remaining /= 10
                count += 1
            }
            out.append(contentsOf: UnsafeRawBufferPointer(rebasing: buffer[(24 - count)...]))
        }
    }
}
