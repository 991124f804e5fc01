import NavigationClient
import Testing

/// The text/event-stream parser, fed in arbitrary pieces.
struct ServerSentEventParserTests {
    let stream = "retry: 2000\r\n: a comment\r\nid: 7\r\nevent: state\r\ndata: {\"a\":1}\r\n\r\nid: 8\nevent: pop\ndata: x\ndata: y\n\n:heartbeat\n\nid: 9\revent: end\rdata:{}\r\r"

    @Test(arguments: [1, 2, 5, 1000]) func eventsSurviveAnySplit(piece: Int) {
        var parser = ServerSentEventParser()
        var events: [ServerSentEvent] = []
        let bytes = Array(stream.utf8)
        for start in stride(from: 0, to: bytes.count, by: piece) {
            events += parser.feed(bytes[start..<min(start + piece, bytes.count)])
        }
        #expect(events == [
            ServerSentEvent(id: "7", type: "state", data: #"{"a":1}"#),
            ServerSentEvent(id: "8", type: "pop", data: "x\ny"),
            ServerSentEvent(id: "9", type: "end", data: "{}"),
        ])
        #expect(parser.retry == 2000 && parser.lastEventID == "9")
    }

    /// An event over the limit is dropped whole, never delivered cut short; the stream goes on.
    @Test func anEventOverTheLimitIsDroppedWholeAndCounted() {
        var parser = ServerSentEventParser()
        parser.maxEventBytes = 16
        let events = parser.feed(Array("event: snapshot\ndata: 0123456789abcdef\nid: 3\n\nid: 4\ndata: small\n\ndata: 0123456789\ndata: 0123456789\n\n".utf8))
        #expect(events == [ServerSentEvent(id: "4", type: "message", data: "small")])
        #expect(parser.oversizedEvents == 2, "a long line, and lines that together are too long")
    }

    /// A byte order mark at the start of the stream is not part of its first line, however the
    /// bytes are split; one later on is.
    @Test(arguments: [1, 2, 100]) func aLeadingByteOrderMarkIsSkipped(piece: Int) {
        var parser = ServerSentEventParser()
        let bytes = Array("\u{FEFF}event: snapshot\ndata: x\n\n".utf8)
        var events: [ServerSentEvent] = []
        for start in stride(from: 0, to: bytes.count, by: piece) { events += parser.feed(bytes[start..<min(start + piece, bytes.count)]) }
        #expect(events == [ServerSentEvent(id: nil, type: "snapshot", data: "x")])
        // Bytes that only begin like a mark are the stream's own.
        var plain = ServerSentEventParser()
        #expect(plain.feed(Array([0xEF, 0x0A, 0x0A]) + Array("data: y\n\n".utf8)) == [ServerSentEvent(id: nil, type: "message", data: "y")])
    }

    /// `retry:` takes ASCII digits only.
    @Test func retryIsDigitsOnly() {
        var parser = ServerSentEventParser()
        _ = parser.feed(Array("retry: 1500\n\nretry: +5\n\nretry: -1\n\nretry: 1e3\n\nretry:\n\n".utf8))
        #expect(parser.retry == 1500)
    }
}
