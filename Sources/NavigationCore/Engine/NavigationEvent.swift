/// One event of a session's stream. Its JSON is encoded once, when it happens, and shared by
/// every subscriber and response that carries it.
public struct NavigationEvent: Sendable {
    /// The SSE `event:` name.
    public enum Kind: String, Sendable {
        /// The whole tree.
        case snapshot
        /// A feature was presented.
        case present
        /// A presentation went away.
        case dismiss
        /// An element was pushed.
        case push
        /// Elements were popped.
        case pop
        /// A feature's own fields changed.
        case state
        /// The session ended.
        case end
    }

    /// The session's event sequence number: strictly increasing, the SSE `id:`.
    public let sequence: Int
    /// Its type.
    public let kind: Kind
    /// Its `data:` JSON.
    public let data: JSON
    /// `data` encoded once, shared by every stream and answer that carries it.
    public let encodedData: [UInt8]

    /// An event, its data encoded now.
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
