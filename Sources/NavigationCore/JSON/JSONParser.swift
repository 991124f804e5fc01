/// Why a request body is not JSON, with the byte offset where parsing stopped.
public struct JSONSyntaxError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The byte offset where parsing stopped.
    public let offset: Int
    /// What was wrong there.
    public let reason: String
    public var description: String { "invalid JSON at byte \(offset): \(reason)" }
}

/// A strict RFC 8259 parser over UTF-8 bytes.
///
/// Bodies come straight off the socket, so it validates UTF-8, bounds nesting depth and never traps.
public struct JSONParser {
    /// Nesting deeper than this is refused: a hostile body cannot exhaust the stack.
    public static let maximumDepth = 256
    /// The bound for documents navd wrote itself (a stored state, tree or event), which nest
    /// deeper than the request that built them: a few levels per feature on screen, as deep as
    /// `SessionLimits.maxDepth` lets features go. SQLite's JSON functions, which read the stored
    /// events, take at least as many (1,000 from SQLite 3.45 on, 2,000 before).
    public static let storedDocumentDepth = 1000

    private let bytes: [UInt8]
    private let maximumDepth: Int
    private var index = 0
    private var depth = 0

    /// Parses one JSON value that is all of `bytes` (whitespace aside), nested at most
    /// `maximumDepth` deep.
    public static func parse(_ bytes: [UInt8], maximumDepth: Int = maximumDepth) throws(JSONSyntaxError) -> JSON {
        var parser = JSONParser(bytes: bytes, maximumDepth: maximumDepth)
        parser.skipWhitespace()
        let value = try parser.parseValue()
        parser.skipWhitespace()
        guard parser.index == bytes.count else { throw parser.error("unexpected data after the value") }
        return value
    }

    /// Parses one JSON value that is all of `text`.
    public static func parse(_ text: String) throws(JSONSyntaxError) -> JSON {
        try parse(Array(text.utf8))
    }

    private init(bytes: [UInt8], maximumDepth: Int) {
        self.bytes = bytes
        self.maximumDepth = maximumDepth
    }

    private func error(_ reason: String) -> JSONSyntaxError {
        JSONSyntaxError(offset: index, reason: reason)
    }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private mutating func parseValue() throws(JSONSyntaxError) -> JSON {
        guard index < bytes.count else { throw error("unexpected end of input") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default: throw error("unexpected character")
        }
    }

    private mutating func expectLiteral(_ literal: StaticString) throws(JSONSyntaxError) {
        let count = literal.utf8CodeUnitCount
        guard index + count <= bytes.count else { throw error("unexpected end of input") }
        let matches = literal.withUTF8Buffer { expected in
            (0..<count).allSatisfy { bytes[index + $0] == expected[$0] }
        }
        guard matches else { throw error("invalid literal") }
        index += count
    }

    private mutating func enter() throws(JSONSyntaxError) {
        depth += 1
        guard depth <= maximumDepth else { throw error("nesting deeper than \(maximumDepth)") }
    }

    private mutating func parseObject() throws(JSONSyntaxError) -> JSON {
        try enter()
        defer { depth -= 1 }
        index += 1
        var object = JSONObject()
        // Small objects check duplicates by scanning; large ones by hashing, so a body of many
        // keys costs linear time, not quadratic.
        var seen: Set<String>?
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "}") {
            index += 1
            return .object(object)
        }
        while true {
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: "\"") else { throw error("expected a string key") }
            let key = try parseString()
            skipWhitespace()
            guard index < bytes.count, bytes[index] == UInt8(ascii: ":") else { throw error("expected ':'") }
            index += 1
            skipWhitespace()
            let value = try parseValue()
            if object.count == 16 { seen = Set(object.keys) }
            if seen == nil {
                guard object[key] == nil else { throw error("duplicate key \"\(key)\"") }
            } else {
                guard seen?.insert(key).inserted == true else { throw error("duplicate key \"\(key)\"") }
            }
            object.append(key, value)
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "}") {
                index += 1
                return .object(object)
            } else {
                throw error("expected ',' or '}'")
            }
        }
    }

    private mutating func parseArray() throws(JSONSyntaxError) -> JSON {
        try enter()
        defer { depth -= 1 }
        index += 1
        var elements: [JSON] = []
        skipWhitespace()
        if index < bytes.count, bytes[index] == UInt8(ascii: "]") {
            index += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue())
            skipWhitespace()
            guard index < bytes.count else { throw error("unexpected end of input") }
            if bytes[index] == UInt8(ascii: ",") {
                index += 1
            } else if bytes[index] == UInt8(ascii: "]") {
                index += 1
                return .array(elements)
            } else {
                throw error("expected ',' or ']'")
            }
        }
    }

    private mutating func parseString() throws(JSONSyntaxError) -> String {
        index += 1
        let start = index
        // Fast path: no escapes. ASCII needs no validation (most keys and values are ASCII).
        var ascii = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text: String
                if ascii {
                    text = String(decoding: bytes[start..<index], as: UTF8.self)
                } else {
                    guard let valid = String(validating: bytes[start..<index], as: UTF8.self) else {
                        throw error("invalid UTF-8 in string")
                    }
                    text = valid
                }
                index += 1
                return text
            }
            if byte >= 0x80 { ascii = false }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw error("control character in string") }
            index += 1
        }
        var scalars: [UInt8] = Array(bytes[start..<index])
        while index < bytes.count {
            let byte = bytes[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                guard let text = String(validating: scalars, as: UTF8.self) else {
                    throw error("invalid UTF-8 in string")
                }
                return text
            case UInt8(ascii: "\\"):
                index += 1
                guard index < bytes.count else { throw error("unexpected end of input") }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""): scalars.append(0x22)
                case UInt8(ascii: "\\"): scalars.append(0x5C)
                case UInt8(ascii: "/"): scalars.append(0x2F)
                case UInt8(ascii: "b"): scalars.append(0x08)
                case UInt8(ascii: "f"): scalars.append(0x0C)
                case UInt8(ascii: "n"): scalars.append(0x0A)
                case UInt8(ascii: "r"): scalars.append(0x0D)
                case UInt8(ascii: "t"): scalars.append(0x09)
                case UInt8(ascii: "u"):
                    var code = try parseHex4()
                    if (0xD800..<0xDC00).contains(code) {
                        guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"),
                              bytes[index + 1] == UInt8(ascii: "u") else { throw error("unpaired surrogate") }
                        index += 2
                        let low = try parseHex4()
                        guard (0xDC00..<0xE000).contains(low) else { throw error("unpaired surrogate") }
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                    } else if (0xDC00..<0xE000).contains(code) {
                        throw error("unpaired surrogate")
                    }
                    guard let scalar = Unicode.Scalar(code) else { throw error("invalid escape") }
                    scalars.append(contentsOf: Array(String(Character(scalar)).utf8))
                default: throw error("invalid escape")
                }
            default:
                if byte < 0x20 { throw error("control character in string") }
                scalars.append(byte)
                index += 1
            }
        }
        throw error("unterminated string")
    }

    private mutating func parseHex4() throws(JSONSyntaxError) -> UInt32 {
        guard index + 4 <= bytes.count else { throw error("unexpected end of input") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = bytes[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw error("invalid \\u escape")
            }
            value = value * 16 + digit
            index += 1
        }
        return value
    }

    private mutating func parseNumber() throws(JSONSyntaxError) -> JSON {
        let start = index
        if bytes[index] == UInt8(ascii: "-") { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        var isInteger = true
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            isInteger = false
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw error("invalid number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        let text = String(decoding: bytes[start..<index], as: UTF8.self)
        if isInteger, let integer = Int(text) { return .int(integer) }
        guard let number = Double(text), number.isFinite else { throw error("number out of range") }
        return .double(number)
    }

    private func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }
}
