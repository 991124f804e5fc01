/// Splits a request-target into its percent-decoded path and query.
enum RequestTarget {
    /// Where the path is in `target`, still encoded: after the scheme and authority of an
    /// absolute-form target, up to the query. Nil for a target of no form this server takes.
    static func pathRange(_ target: UnsafeRawBufferPointer) -> Range<Int>? {
        guard let first = target.first else { return nil }
        if first == ASCII.asterisk { return target.count == 1 ? 0..<1 : nil }
        var pathStart = 0
        if first != ASCII.slash {
            guard let authority = absoluteFormAuthority(target) else { return nil }
            pathStart = authority.upperBound
        }
        var queryStart = target.count
        for index in pathStart..<target.count where target[index] == ASCII.question {
            queryStart = index
            break
        }
        return pathStart..<queryStart
    }

    /// Returns nil if the target is not origin-form, absolute-form or "*", or if its path or
    /// query holds a broken percent-escape or decodes to invalid UTF-8.
    static func decode(_ target: UnsafeRawBufferPointer) -> (path: String, query: [(name: String, value: String)])? {
        guard let range = pathRange(target) else { return nil }
        if target[0] == ASCII.asterisk { return ("*", []) }
        let queryStart = range.upperBound
        let pathBytes = UnsafeRawBufferPointer(rebasing: target[range])
        guard let path = pathBytes.isEmpty ? "/" : decodeComponent(pathBytes, plusIsSpace: false) else {
            return nil
        }
        guard queryStart < target.count else { return (path, []) }
        guard let query = decodeQuery(UnsafeRawBufferPointer(rebasing: target[(queryStart + 1)...])) else {
            return nil
        }
        return (path, query)
    }

    /// For "http://host:port/path", where "host:port" is: the path starts at its end (or the
    /// target ends there). Only `http` and `https` (in any case): a target of another scheme
    /// (`ftp://…`) names no resource of this server, and serving it by its path would answer for
    /// a URL it does not own. Nil for any other target.
    static func absoluteFormAuthority(_ target: UnsafeRawBufferPointer) -> Range<Int>? {
        var index = 0
        for letter in "http".utf8 {
            guard index < target.count, ASCII.lowercased(target[index]) == letter else { return nil }
            index += 1
        }
        if index < target.count, ASCII.lowercased(target[index]) == UInt8(ascii: "s") { index += 1 }
        guard index + 2 < target.count, target[index] == ASCII.colon, target[index + 1] == ASCII.slash, target[index + 2] == ASCII.slash else {
            return nil
        }
        index += 3
        let start = index
        while index < target.count, target[index] != ASCII.slash, target[index] != ASCII.question {
            index += 1
        }
        return start..<index
    }

    private static func decodeQuery(_ bytes: UnsafeRawBufferPointer) -> [(name: String, value: String)]? {
        var result: [(name: String, value: String)] = []
        var start = 0
        while start <= bytes.count {
            var end = start
            while end < bytes.count, bytes[end] != ASCII.ampersand { end += 1 }
            if end > start {
                var equals = end
                for index in start..<end where bytes[index] == ASCII.equals {
                    equals = index
                    break
                }
                let nameBytes = UnsafeRawBufferPointer(rebasing: bytes[start..<equals])
                let valueBytes = UnsafeRawBufferPointer(rebasing: bytes[min(equals + 1, end)..<end])
                guard let name = decodeComponent(nameBytes, plusIsSpace: true),
                      let value = decodeComponent(valueBytes, plusIsSpace: true) else { return nil }
                result.append((name: name, value: value))
            }
            start = end + 1
        }
        return result
    }

    /// Percent-decodes one component; nil on a broken escape or invalid UTF-8.
    static func decodeComponent(_ bytes: UnsafeRawBufferPointer, plusIsSpace: Bool) -> String? {
        var needsDecoding = false
        var isASCII = true
        for byte in bytes {
            if byte == ASCII.percent || (plusIsSpace && byte == ASCII.plus) { needsDecoding = true }
            if byte >= 0x80 { isASCII = false }
        }
        if !needsDecoding {
            return isASCII ? String(decoding: bytes, as: UTF8.self) : String(validating: bytes, as: UTF8.self)
        }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == ASCII.percent {
                guard index + 2 < bytes.count,
                      let high = ASCII.hexValue(bytes[index + 1]),
                      let low = ASCII.hexValue(bytes[index + 2]) else { return nil }
                decoded.append(high << 4 | low)
                index += 3
            } else {
                decoded.append(plusIsSpace && byte == ASCII.plus ? ASCII.space : byte)
                index += 1
            }
        }
        return String(validating: decoded, as: UTF8.self)
    }
}
