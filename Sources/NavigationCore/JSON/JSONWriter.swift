/// Serializes JSON to UTF-8 bytes, compactly.
public enum JSONWriter {
    /// `value` as compact UTF-8 JSON.
    public static func bytes(_ value: JSON) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64)
        write(value, into: &out)
        return out
    }

    /// `value` as compact JSON text.
    public static func string(_ value: JSON) -> String {
        String(decoding: bytes(value), as: UTF8.self)
    }

    /// How many bytes `bytes(value)` would hold, without writing them: what a session's state
    /// is measured in against its bound, on every change, so it must not allocate.
    public static func size(_ value: JSON) -> Int {
        switch value {
        case .null: 4
        case .bool(let flag): flag ? 4 : 5
        case .int(let number): intSize(number)
        case .double(let number):
            if !number.isFinite { 4 } else if number.rounded() == number, abs(number) < 1e15 { intSize(Int(number)) + 2 } else { number.description.utf8.count }
        case .string(let text): stringSize(text)
        case .array(let elements): elements.reduce(max(2, elements.count + 1)) { $0 + size($1) }
        case .object(let object): size(object)
        }
    }

    /// How many bytes `object` takes as compact JSON.
    public static func size(_ object: JSONObject) -> Int {
        object.pairs.reduce(max(2, 2 * object.count + 1)) { $0 + stringSize($1.key) + size($1.value) }
    }

    private static func intSize(_ number: Int) -> Int {
        var magnitude = number.magnitude
        var digits = 1
        while magnitude >= 10 {
            magnitude /= 10
            digits += 1
        }
        return number < 0 ? digits + 1 : digits
    }

    private static func stringSize(_ text: String) -> Int {
        text.utf8.reduce(2) { $0 + width($1) }
    }

    /// The bytes `byte` takes in a JSON string: 1, or its escape's (`\n`, `\u0001`).
    @inline(__always)
    private static func width(_ byte: UInt8) -> Int {
        switch byte {
        case 0x0A, 0x0D, 0x09, UInt8(ascii: "\""), UInt8(ascii: "\\"): 2
        case ..<0x20: 6
        default: 1
        }
    }

    /// Appends `value` to `out`, for writers that assemble a larger answer.
    public static func write(_ value: JSON, into out: inout [UInt8]) {
        switch value {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let flag): out.append(contentsOf: (flag ? "true" : "false").utf8)
        case .int(let number): writeInt(number, into: &out)
        case .double(let number):
            if number.isFinite {
                if number.rounded() == number, abs(number) < 1e15 {
                    writeInt(Int(number), into: &out)
                    out.append(contentsOf: ".0".utf8)
                } else {
                    out.append(contentsOf: number.description.utf8)
                }
            } else {
                out.append(contentsOf: "null".utf8)
            }
        case .string(let text): writeString(text, into: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                write(element, into: &out)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            for (index, pair) in object.pairs.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                writeString(pair.key, into: &out)
                out.append(UInt8(ascii: ":"))
                write(pair.value, into: &out)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Appends a decimal integer without allocating a `String`.
    public static func writeInt(_ number: Int, into out: inout [UInt8]) {
        if number == 0 {
            out.append(UInt8(ascii: "0"))
            return
        }
        var magnitude = number.magnitude
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        withUnsafeMutableBytes(of: &digits) { buffer in
            while magnitude > 0 {
                buffer[count] = UInt8(ascii: "0") + UInt8(magnitude % 10)
                magnitude /= 10
                count += 1
            }
        }
        if number < 0 { out.append(UInt8(ascii: "-")) }
        withUnsafeBytes(of: &digits) { buffer in
            var index = count - 1
            while index >= 0 {
                out.append(buffer[index])
                index -= 1
            }
        }
    }

    /// Appends a quoted, escaped JSON string. Runs of bytes that need no escape are copied
    /// whole: states carry long texts, and a byte at a time made a large GET cost the loop
    /// tens of milliseconds.
    public static func writeString(_ text: String, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { bytes in
            var runStart = 0
            for index in bytes.indices {
                let byte = bytes[index]
                guard width(byte) > 1 else { continue }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart..<index]))
                appendEscaped(byte, into: &out)
                runStart = index + 1
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[runStart...]))
        }
        out.append(UInt8(ascii: "\""))
    }

    private static func appendEscaped(_ byte: UInt8, into out: inout [UInt8]) {
        out.append(UInt8(ascii: "\\"))
        switch byte {
        case 0x0A: out.append(UInt8(ascii: "n"))
        case 0x0D: out.append(UInt8(ascii: "r"))
        case 0x09: out.append(UInt8(ascii: "t"))
        case 0x20...: out.append(byte)
        default:
            out.append(contentsOf: "u00".utf8)
            out.append(hexDigit(byte >> 4))
            out.append(hexDigit(byte & 0xF))
        }
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }
}

extension JSON {
    /// Compact UTF-8 serialization.
    public var bytes: [UInt8] { JSONWriter.bytes(self) }
    /// Compact serialization as text.
    public var text: String { JSONWriter.string(self) }
}
