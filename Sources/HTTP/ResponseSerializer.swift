/// Writes status lines and header sections as bytes.
enum ResponseSerializer {
    enum ConnectionHeader {
        case none
        case close
        case keepAlive
    }

    static let continueBytes: StaticString = "HTTP/1.1 100 Continue\r\n\r\n"

    /// Statuses for which no body and no Content-Length are sent.
    static func forbidsBody(_ status: Int) -> Bool {
        status == 204 || status == 304
    }

    /// Whether the handler's own headers ask to close the connection.
    static func requestsClose(_ headers: HTTPHeaders) -> Bool {
        for (name, value) in headers where ASCII.namesEqual(name, "connection") {
            if value.utf8.count == 5, ASCII.namesEqual(value, "close") { return true }
            if value.lowercased().split(separator: ",").contains(where: { $0.trimmingSpaces == "close" }) { return true }
        }
        return false
    }

    /// Appends the status line and headers up to and including the empty line.
    /// `Content-Length`, `Transfer-Encoding` and `Connection` from `headers` are replaced by
    /// the server's own; fields that would break the framing (bad names, CR/LF) are dropped.
    static func appendHead(
        status: Int,
        headers: HTTPHeaders,
        contentLength: Int?,
        connection: ConnectionHeader,
        isEventStream: Bool = false,
        date: [UInt8],
        to out: inout [UInt8]
    ) {
        ASCII.append("HTTP/1.1 ", to: &out)
        ASCII.appendDecimal(status, to: &out)
        out.append(ASCII.space)
        ASCII.append(HTTPStatusReason.phrase(for: status), to: &out)
        ASCII.append("\r\n", to: &out)
        out.append(contentsOf: date)
        var hasCacheControl = false
        var hasAccelBuffering = false
        for (name, value) in headers {
            switch name.utf8.count {
            case 14 where ASCII.namesEqual(name, "content-length"): continue
            case 17 where ASCII.namesEqual(name, "transfer-encoding"): continue
            case 10 where ASCII.namesEqual(name, "connection"): continue
            case 13 where ASCII.namesEqual(name, "cache-control"): hasCacheControl = true
            case 17 where ASCII.namesEqual(name, "x-accel-buffering"): hasAccelBuffering = true
            default: break
            }
            guard isValidName(name), isValidValue(value) else { continue }
            out.append(contentsOf: name.utf8)
            ASCII.append(": ", to: &out)
            out.append(contentsOf: value.utf8)
            ASCII.append("\r\n", to: &out)
        }
        if isEventStream {
            if !hasCacheControl { ASCII.append("Cache-Control: no-cache\r\n", to: &out) }
            if !hasAccelBuffering { ASCII.append("X-Accel-Buffering: no\r\n", to: &out) }
        }
        if let contentLength {
            ASCII.append("Content-Length: ", to: &out)
            ASCII.appendDecimal(contentLength, to: &out)
            ASCII.append("\r\n", to: &out)
        }
        switch connection {
        case .none: break
        case .close: ASCII.append("Connection: close\r\n", to: &out)
        case .keepAlive: ASCII.append("Connection: keep-alive\r\n", to: &out)
        }
        ASCII.append("\r\n", to: &out)
    }

    private static func isValidName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.allSatisfy(ASCII.isTokenCharacter)
    }

    private static func isValidValue(_ value: String) -> Bool {
        value.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x7F || $0 == ASCII.tab }
    }
}

private extension Substring {
    var trimmingSpaces: Substring {
        var result = self
        while result.first == " " || result.first == "\t" { result = result.dropFirst() }
        while result.last == " " || result.last == "\t" { result = result.dropLast() }
        return result
    }
}
