/// One dispatched server-sent event.
public struct ServerSentEvent: Sendable, Hashable {
    /// The `id:` it carried, if any.
    public var id: String?
    /// The `event:` name; `message` when none was sent.
    public var type: String
    /// The `data:` lines, joined by newlines.
    public var data: String

    /// An event as the parser dispatches it.
    public init(id: String?, type: String, data: String) {
        self.id = id
        self.type = type
        self.data = data
    }
}

/// The text/event-stream format (WHATWG HTML, "Server-sent events"), fed bytes as they come:
/// lines end in LF, CRLF or CR; `:` starts a comment; a blank line dispatches the event.
public struct ServerSentEventParser: Sendable {
    /// The last `id:` seen, which a reconnection sends as `Last-Event-ID`.
    public private(set) var lastEventID: String?
    /// The last valid `retry:` in milliseconds.
    public private(set) var retry: Int?
    private var line: [UInt8] = []
    private var afterCR = false
    private var type = ""
    private var data: [String] = []
    private var hasData = false
    /// A line longer than this is dropped: a hostile stream cannot grow memory without bound.
    public var maxLineBytes = 1 << 20

    /// A parser at the start of a stream.
    public init() {}

    /// Parses the next bytes of the stream and returns the events they complete.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            if afterCR {
                afterCR = false
                if byte == 0x0A { continue }
            }
            switch byte {
            case 0x0D: afterCR = true; if let event = endLine() { events.append(event) }
            case 0x0A: if let event = endLine() { events.append(event) }
            default: if line.count < maxLineBytes { line.append(byte) }
            }
        }
        return events
    }

    private mutating func endLine() -> ServerSentEvent? {
        defer { line.removeAll(keepingCapacity: true) }
        if line.isEmpty {
            defer { type = ""; data = []; hasData = false }
            guard hasData else { return nil }
            return ServerSentEvent(id: lastEventID, type: type.isEmpty ? "message" : type, data: data.joined(separator: "\n"))
        }
        if line.first == UInt8(ascii: ":") { return nil }
        let text = String(decoding: line, as: UTF8.self)
        let field: Substring
        var value: Substring
        if let colon = text.firstIndex(of: ":") {
            field = text[..<colon]
            value = text[text.index(after: colon)...]
            if value.first == " " { value = value.dropFirst() }
        } else {
            field = Substring(text)
            value = ""
        }
        switch field {
        case "event": type = String(value)
        case "data": data.append(String(value)); hasData = true
        case "id": if !value.contains("\0") { lastEventID = String(value) }
        case "retry": if let milliseconds = Int(value), milliseconds >= 0 { retry = milliseconds }
        default: break
        }
        return nil
    }
}
