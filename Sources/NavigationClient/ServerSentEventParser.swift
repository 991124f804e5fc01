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
/// a leading byte order mark is skipped; lines end in LF, CRLF or CR; `:` starts a comment; a
/// blank line dispatches the event.
public struct ServerSentEventParser: Sendable {
    /// The last `id:` seen, which a reconnection sends as `Last-Event-ID`.
    public private(set) var lastEventID: String?
    /// The last valid `retry:` in milliseconds.
    public private(set) var retry: Int?
    /// Events dropped whole for being over `maxEventBytes`. Never delivered in part: a cut
    /// snapshot would decode as garbage, or worse, as a smaller tree.
    public private(set) var oversizedEvents = 0
    private var line: [UInt8] = []
    private var afterCR = false
    /// Bytes of a byte order mark matched at the start of the stream; nil once past it.
    private var byteOrderMark: Int? = 0
    private var type = ""
    private var data: [String] = []
    private var dataBytes = 0
    private var hasData = false
    /// The event being read went over `maxEventBytes`: the rest of it is skipped.
    private var oversized = false
    /// The most an event's lines may hold, so a hostile stream cannot grow memory without
    /// bound. navd's largest event is a snapshot of a whole tree, which session limits keep far
    /// below this.
    public var maxEventBytes = 64 << 20

    private static let byteOrderMarkBytes: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// A parser at the start of a stream.
    public init() {}

    /// Parses the next bytes of the stream and returns the events they complete.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            if let matched = byteOrderMark {
                if byte == Self.byteOrderMarkBytes[matched] {
                    byteOrderMark = matched + 1 == Self.byteOrderMarkBytes.count ? nil : matched + 1
                    continue
                }
                // Not a mark after all: what looked like its start is the stream's first bytes.
                byteOrderMark = nil
                for earlier in Self.byteOrderMarkBytes[..<matched] { take(earlier, into: &events) }
            }
            take(byte, into: &events)
        }
        return events
    }

    private mutating func take(_ byte: UInt8, into events: inout [ServerSentEvent]) {
        if afterCR {
            afterCR = false
            if byte == 0x0A { return }
        }
        switch byte {
        case 0x0D: afterCR = true; if let event = endLine() { events.append(event) }
        case 0x0A: if let event = endLine() { events.append(event) }
        default:
            guard !oversized else { return }
            if line.count + dataBytes < maxEventBytes {
                line.append(byte)
            } else {
                // What was read of it goes at once: nothing of it will be delivered.
                oversized = true
                line.removeAll()
                data = []
                dataBytes = 0
            }
        }
    }

    private mutating func endLine() -> ServerSentEvent? {
        defer { line.removeAll(keepingCapacity: line.capacity <= 64 << 10) }
        if line.isEmpty {
            defer { type = ""; data = []; dataBytes = 0; hasData = false; oversized = false }
            if oversized {
                oversizedEvents += 1
                return nil
            }
            guard hasData else { return nil }
            return ServerSentEvent(id: lastEventID, type: type.isEmpty ? "message" : type, data: data.joined(separator: "\n"))
        }
        if oversized { return nil }
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
        case "data": data.append(String(value)); dataBytes += value.utf8.count + 1; hasData = true
        case "id": if !value.contains("\0") { lastEventID = String(value) }
        case "retry": if !value.isEmpty, value.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let milliseconds = Int(value) { retry = milliseconds }
        default: break
        }
        return nil
    }
}
