/// Parses a complete request head (request line, header fields, final empty line) straight
/// from bytes. Strict by design: single spaces in the request line, token methods and field
/// names, no obsolete line folding, no control bytes, valid UTF-8 in values.
enum RequestHeadParser {
    /// - Parameter anyTransferCoding: reads a head whose body is in a coding navd does not
    ///   decode as if it had none, to tell a refusal of it which request it refuses.
    static func parse(
        _ head: UnsafeRawBufferPointer, requestLineLength: Int, maxBodyBytes: Int, anyTransferCoding: Bool = false
    ) -> Result<RequestHead, ProtocolError> {
        let line = UnsafeRawBufferPointer(rebasing: head[0..<(requestLineLength - 2)])
        guard let firstSpace = line.firstIndex(of: ASCII.space), firstSpace > 0 else {
            return .failure(.badRequest("Malformed request line."))
        }
        let methodBytes = UnsafeRawBufferPointer(rebasing: line[0..<firstSpace])
        guard methodBytes.allSatisfy(ASCII.isTokenCharacter) else {
            return .failure(.badRequest("The method is not a token."))
        }
        let rest = UnsafeRawBufferPointer(rebasing: line[(firstSpace + 1)...])
        guard let secondSpace = rest.firstIndex(of: ASCII.space), secondSpace > 0 else {
            return .failure(.badRequest("Malformed request line."))
        }
        let targetBytes = UnsafeRawBufferPointer(rebasing: rest[0..<secondSpace])
        // Visible ASCII, and no `#`: a fragment never travels in a request (RFC 9112 3.2), so
        // one is a malformed target, not part of an id.
        guard targetBytes.allSatisfy({ $0 > 0x20 && $0 < 0x7F && $0 != UInt8(ascii: "#") }) else {
            return .failure(.badRequest("The request target holds invalid characters."))
        }
        let versionBytes = UnsafeRawBufferPointer(rebasing: rest[(secondSpace + 1)...])
        let isHTTP11: Bool
        switch parseVersion(versionBytes) {
        case .success(let value): isHTTP11 = value
        case .failure(let error): return .failure(error)
        }
        guard let decodedTarget = RequestTarget.decode(targetBytes) else {
            return .failure(.badRequest("The request target cannot be decoded."))
        }
        var result = RequestHead(
            request: HTTPRequest(
                method: String(decoding: methodBytes, as: UTF8.self),
                target: String(decoding: targetBytes, as: UTF8.self),
                path: decodedTarget.path,
                query: decodedTarget.query,
                headers: HTTPHeaders(),
                body: [],
                version: isHTTP11 ? "HTTP/1.1" : "HTTP/1.0"
            ),
            isHTTP11: isHTTP11,
            framing: .none,
            connectionClose: false,
            connectionKeepAlive: false,
            expectsContinue: false
        )
        let fields = UnsafeRawBufferPointer(rebasing: head[requestLineLength..<(head.count - 2)])
        // One allocation for a usual request's fields, not one per doubling.
        result.request.headers.reserveCapacity(8)
        if let error = parseFields(fields, into: &result, maxBodyBytes: maxBodyBytes, anyTransferCoding: anyTransferCoding) {
            return .failure(error)
        }
        return .success(result)
    }

    /// RFC 3986's `host [ ":" port ]`, or nothing (RFC 9112 3.2 allows an empty Host): a name of
    /// unreserved characters, sub-delimiters and percent-escapes, or a bracketed IP literal.
    static func isValidHost(_ value: UnsafeRawBufferPointer) -> Bool {
        func isNameByte(_ byte: UInt8) -> Bool {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"): true
            default: "-._~!$&'()*+,;=".utf8.contains(byte)
            }
        }
        var index = 0
        if value.first == UInt8(ascii: "[") {
            guard let close = value.firstIndex(of: UInt8(ascii: "]")), close > 1 else { return false }
            guard value[1..<close].allSatisfy({ isNameByte($0) || $0 == ASCII.colon }) else { return false }
            index = close + 1
        } else {
            while index < value.count, value[index] != ASCII.colon {
                if value[index] == ASCII.percent {
                    guard index + 2 < value.count, ASCII.hexValue(value[index + 1]) != nil, ASCII.hexValue(value[index + 2]) != nil else {
                        return false
                    }
                    index += 3
                } else {
                    guard isNameByte(value[index]) else { return false }
                    index += 1
                }
            }
        }
        guard index < value.count else { return true }
        guard value[index] == ASCII.colon else { return false }
        return value[(index + 1)...].allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// "HTTP/1.1" → true, "HTTP/1.0" → false; a later 1.x is answered as 1.1.
    private static func parseVersion(_ bytes: UnsafeRawBufferPointer) -> Result<Bool, ProtocolError> {
        guard bytes.count == 8,
              bytes[0] == 0x48, bytes[1] == 0x54, bytes[2] == 0x54, bytes[3] == 0x50, bytes[4] == ASCII.slash,
              bytes[6] == 0x2E,
              (0x30...0x39).contains(bytes[5]), (0x30...0x39).contains(bytes[7]) else {
            return .failure(.badRequest("Malformed HTTP version."))
        }
        guard bytes[5] == 0x31 else { return .failure(.versionNotSupported) }
        return .success(bytes[7] != 0x30)
    }

    private static func parseFields(
        _ fields: UnsafeRawBufferPointer, into head: inout RequestHead, maxBodyBytes: Int, anyTransferCoding: Bool
    ) -> ProtocolError? {
        var contentLength: Int?
        var codings: [String] = []
        var sawTransferEncoding = false
        var hosts = 0
        var start = 0
        while start < fields.count {
            // Lines end at LF, which the scanner guarantees follows a CR; any other CR is a
            // control byte in the line and is refused below.
            var lineFeed = start
            while lineFeed < fields.count && fields[lineFeed] != ASCII.lf { lineFeed += 1 }
            guard lineFeed < fields.count, lineFeed > start, fields[lineFeed - 1] == ASCII.cr else {
                return .badRequest("Malformed header line.")
            }
            let line = UnsafeRawBufferPointer(rebasing: fields[start..<(lineFeed - 1)])
            start = lineFeed + 1
            guard let first = line.first, !ASCII.isWhitespace(first) else {
                return .badRequest("Obsolete line folding is not accepted.")
            }
            guard let colon = line.firstIndex(of: ASCII.colon), colon > 0 else {
                return .badRequest("Malformed header field.")
            }
            let name = UnsafeRawBufferPointer(rebasing: line[0..<colon])
            guard name.allSatisfy(ASCII.isTokenCharacter) else {
                return .badRequest("Malformed header field name.")
            }
            let value = ASCII.trimmed(UnsafeRawBufferPointer(rebasing: line[(colon + 1)...]))
            guard let valueText = fieldValue(value) else {
                return .badRequest("A header field value holds invalid bytes.")
            }
            head.request.headers.add(String(decoding: name, as: UTF8.self), valueText)

            switch name.count {
            case 14 where ASCII.equalsIgnoringCase(name, "content-length"):
                guard let length = parseContentLength(value), contentLength == nil || contentLength == length else {
                    return .badRequest("Invalid Content-Length.")
                }
                contentLength = length
            case 17 where ASCII.equalsIgnoringCase(name, "transfer-encoding"):
                sawTransferEncoding = true
                forEachListElement(value) { codings.append(String(decoding: $0, as: UTF8.self).lowercased()) }
            case 10 where ASCII.equalsIgnoringCase(name, "connection"):
                forEachListElement(value) { option in
                    if ASCII.equalsIgnoringCase(option, "close") { head.connectionClose = true }
                    if ASCII.equalsIgnoringCase(option, "keep-alive") { head.connectionKeepAlive = true }
                }
            case 6 where ASCII.equalsIgnoringCase(name, "expect"):
                if ASCII.equalsIgnoringCase(value, "100-continue") { head.expectsContinue = true }
            case 4 where ASCII.equalsIgnoringCase(name, "host"):
                hosts += 1
                guard isValidHost(value) else { return .badRequest("The Host header field is not a host and port.") }
            default:
                break
            }
        }
        // RFC 9112 3.2: which host a request is for must be unambiguous, and said in HTTP/1.1.
        guard hosts <= 1 else { return .badRequest("More than one Host header field.") }
        guard hosts == 1 || !head.isHTTP11 else { return .badRequest("An HTTP/1.1 request must carry a Host header field.") }
        if sawTransferEncoding {
            guard contentLength == nil else {
                return .badRequest("Content-Length and Transfer-Encoding together are not accepted.")
            }
            guard head.isHTTP11 else { return .badRequest("Transfer-Encoding requires HTTP/1.1.") }
            guard codings != ["chunked"] else {
                head.framing = .chunked
                return nil
            }
            if codings.isEmpty || codings.dropLast().contains("chunked") {
                return .badRequest("Invalid Transfer-Encoding.")
            }
            return anyTransferCoding ? nil : .notImplemented("Only the chunked transfer coding is supported.")
        } else if let contentLength {
            if contentLength > maxBodyBytes { return .payloadTooLarge }
            head.framing = contentLength > 0 ? .length(contentLength) : .none
        }
        return nil
    }

    /// The value as text; nil for control characters. Bytes past ASCII that are not UTF-8 are
    /// obs-text, which RFC 9110 (5.5) asks a recipient to treat as opaque rather than refuse (a
    /// proxy's Latin-1 header must not fail the request): they are read as ISO-8859-1, one
    /// character each, so no value navd reads for itself can match them.
    private static func fieldValue(_ bytes: UnsafeRawBufferPointer) -> String? {
        var isASCII = true
        for byte in bytes {
            if byte < 0x20 && byte != ASCII.tab || byte == 0x7F { return nil }
            if byte >= 0x80 { isASCII = false }
        }
        if isASCII { return String(decoding: bytes, as: UTF8.self) }
        return String(validating: bytes, as: UTF8.self) ?? String(String.UnicodeScalarView(bytes.map { Unicode.Scalar($0) }))
    }

    /// A Content-Length value, possibly a list of identical values ("5, 5"); nil if invalid.
    private static func parseContentLength(_ bytes: UnsafeRawBufferPointer) -> Int? {
        var result: Int?
        var valid = !bytes.isEmpty
        forEachListElement(bytes) { element in
            guard valid, !element.isEmpty, element.count <= 18 else {
                valid = false
                return
            }
            var value = 0
            for digit in element {
                guard digit >= 0x30 && digit <= 0x39 else {
                    valid = false
                    return
                }
                value = value * 10 + Int(digit - 0x30)
            }
            if let result, result != value { valid = false }
            result = value
        }
        return valid ? result : nil
    }

    /// Calls `body` with each trimmed, non-empty element of a comma-separated list.
    private static func forEachListElement(_ bytes: UnsafeRawBufferPointer, _ body: (UnsafeRawBufferPointer) -> Void) {
        var start = 0
        while start <= bytes.count {
            var end = start
            while end < bytes.count, bytes[end] != ASCII.comma { end += 1 }
            let element = ASCII.trimmed(UnsafeRawBufferPointer(rebasing: bytes[start..<end]))
            if !element.isEmpty { body(element) }
            start = end + 1
        }
    }
}
