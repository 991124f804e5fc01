/// One dispatched server-sent event.
public struct ServerSentEvent: Sendable, Hashable {
    /// The stream's last event id when it was dispatched (what `Last-Event-ID` resumes from):
    /// its own `id:`, or an earlier event's when it carried none.
    public var id: String?
    /// Whether the event's own `id:` field set `id`. One that only inherited an earlier id is
    /// not a repeat of that event.
    public var hasOwnID: Bool
    /// The `event:` name; `message` when none was sent.
    public var type: String
    /// The `data:` lines, joined by newlines.
    public var data: String

    /// An event as the parser dispatches it; `hasOwnID` defaults to whether there is an `id`.
    public init(id: String?, type: String, data: String, hasOwnID: Bool? = nil) {
        self.id = id
        self.hasOwnID = hasOwnID ?? (id != nil)
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
    /// The most an event's lines may hold, so a hostile stream cannot grow memory without
    /// bound: every byte kept counts, a data line's newline included. navd's largest event is a
    /// snapshot of a whole tree, which session limits keep far below this.
    public var maxEventBytes = 64 << 20
    /// Stop at the first event over `maxEventBytes`: nothing after it is dispatched, for a
    /// reader that cannot go on past a gap (a mirror of a tree). Off, the stream goes on.
    public var stopsAtOversizedEvent = false

    private var line: [UInt8] = []
    /// Whether the current line has any byte, kept or skipped: only a line with none ends an event.
    private var lineIsEmpty = true
    private var afterCR = false
    /// Bytes of a byte order mark matched at the start of the stream; nil once past it.
    private var byteOrderMark: Int? = 0
    private var type: [UInt8] = []
    /// The data lines so far, joined by newlines as they come: one buffer, so an event of many
    /// short lines costs what its bytes do.
    private var data: [UInt8] = []
    private var hasData = false
    private var hasOwnID = false
    /// The event being read went over `maxEventBytes`: the rest of it is skipped.
    private var oversized = false
    /// An oversized event was met with `stopsAtOversizedEvent`.
    private var stopped = false

    private static let byteOrderMarkBytes: [UInt8] = [0xEF, 0xBB, 0xBF]

    /// A parser at the start of a stream.
    public init() {}

    /// Parses the next bytes of the stream and returns the events they complete.
    public mutating func feed(_ bytes: some Sequence<UInt8>) -> [ServerSentEvent] {
        var events: [ServerSentEvent] = []
        for byte in bytes {
            if stopped { break }
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
            lineIsEmpty = false
            guard !oversized else { return }
            if line.count + data.count + type.count < maxEventBytes {
                line.append(byte)
            } else {
                // What was read of it goes at once: nothing of it will be delivered.
                oversized = true
                line = []
                data = []
                type = []
                if stopsAtOversizedEvent {
                    oversizedEvents += 1
                    stopped = true
                }
            }
        }
    }

    private mutating func endLine() -> ServerSentEvent? {
        defer {
            line.removeAll(keepingCapacity: line.capacity <= 64 << 10)
            lineIsEmpty = true
        }
        if lineIsEmpty {
            defer { type = []; data = []; hasData = false; hasOwnID = false; oversized = false }
            if oversized {
                oversizedEvents += 1
                return nil
            }
            guard hasData else { return nil }
            return ServerSentEvent(id: lastEventID, type: type.isEmpty ? "message" : String(decoding: type, as: UTF8.self),
                                   data: String(decoding: data, as: UTF8.self), hasOwnID: hasOwnID)
        }
        if oversized || line.first == UInt8(ascii: ":") { return nil }
        // Split at the first colon, on the bytes (the spec's code points, not characters: a
        // combining mark after the colon belongs to the value); one space after it is dropped.
        let colon = line.firstIndex(of: UInt8(ascii: ":"))
        let field = line[..<(colon ?? line.endIndex)]
        var value = colon.map { line[(line.index(after: $0))...] } ?? []
        if value.first == UInt8(ascii: " ") { value = value.dropFirst() }
        switch String(decoding: field, as: UTF8.self) {
        case "event":
            type = Array(value)
        case "data":
            if hasData { data.append(0x0A) }
            data.append(contentsOf: value)
            hasData = true
        case "id":
            if !value.contains(0) {
                lastEventID = String(decoding: value, as: UTF8.self)
                hasOwnID = true
            }
        case "retry":
            if !value.isEmpty, value.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let milliseconds = Int(String(decoding: value, as: UTF8.self)) {
                retry = milliseconds
            }
        default: break
        }
        return nil
    }
}
