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
}
