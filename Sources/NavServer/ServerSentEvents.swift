import NavigationCore

/// The `text/event-stream` wire format of navigation events.
enum ServerSentEvents {
    /// Tells a disconnected client how long to wait before reconnecting.
    static let preamble = Array("retry: 3000\n\n".utf8)
    static let heartbeat = Array(": keep-alive\n\n".utf8)

    /// One frame per event, concatenated: encoded once, whatever the number of subscribers.
    static func frames(_ events: [NavigationEvent]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(events.reduce(0) { $0 + $1.encodedData.count + 40 })
        for event in events { append(event, to: &bytes) }
        return bytes
    }

    static func append(_ event: NavigationEvent, to bytes: inout [UInt8]) {
        bytes.append(contentsOf: "id: ".utf8)
        JSONWriter.writeInt(event.sequence, into: &bytes)
        bytes.append(contentsOf: "\nevent: ".utf8)
        bytes.append(contentsOf: event.kind.rawValue.utf8)
        bytes.append(contentsOf: "\ndata: ".utf8)
        bytes.append(contentsOf: event.encodedData)
        bytes.append(contentsOf: "\n\n".utf8)
    }
}
