/// One event of a session's stream. Its JSON is encoded once, when it happens, and shared by
/// every subscriber and response that carries it.
public struct NavigationEvent: Sendable {
    public enum Kind: String, Sendable {
        case snapshot, present, dismiss, push, pop, state, end
    }

    /// The session's event sequence number: strictly increasing, the SSE `id:`.
    public let sequence: Int
    public let kind: Kind
    public let data: JSON
    public let encodedData: [UInt8]

    public init(sequence: Int, kind: Kind, data: JSON) {
        self.sequence = sequence
        self.kind = kind
        self.data = data
        self.encodedData = data.bytes
    }

    /// `{"id","event","data"}`, as an action's response lists what it caused.
    public var json: JSON {
        .object(JSONObject([("id", .int(sequence)), ("event", .string(kind.rawValue)), ("data", data)]))
    }
}

/// Who removed a presentation or popped a stack, as `dismiss` and `pop` events say.
enum Origin: String {
    case server, client
}
