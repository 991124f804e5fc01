import Foundation

/// Who removed a presentation or stack element: the server's state, or a user's dismissal or pop.
public enum RemovalOrigin: String, Sendable, Hashable, Codable { case server, client }

/// One event of a session's stream, decoded from its `event:` name and `data:` JSON (API.md, "Events").
public enum NavigationEvent: Sendable, Hashable {
    public struct Present: Sendable, Hashable, Decodable {
        public var id: String
        public var parent: String
        public var slot: String
        public var style: PresentationStyle
        public var feature: String
        public var state: [String: JSONValue]
        public var stacks: [NavigationStack]
        public var alert: AlertContent?
        public var anchor: String?
    }
    public struct Push: Sendable, Hashable, Decodable {
        public var stack: String
        public var id: String
        public var index: Int
        public var feature: String
        public var state: [String: JSONValue]
        public var stacks: [NavigationStack]
    }

    case snapshot(version: Int, navigation: NavigationNode)
    case present(Present)
    case dismiss(id: String, origin: RemovalOrigin)
    case push(Push)
    case pop(stack: String, ids: [String], origin: RemovalOrigin)
    case state(feature: String, changes: [String: JSONValue])
    case end(reason: String)

    private struct Snapshot: Decodable { var version: Int; var navigation: NavigationNode }
    private struct Dismiss: Decodable { var id: String; var origin: RemovalOrigin }
    private struct Pop: Decodable { var stack: String; var ids: [String]; var origin: RemovalOrigin }
    private struct State: Decodable { var feature: String; var changes: [String: JSONValue] }
    private struct End: Decodable { var reason: String }

    /// Decodes `data` for event type `type`; nil for a type this client does not know.
    public init?(type: String, data: Data) throws {
        let decoder = JSONDecoder()
        switch type {
        case "snapshot":
            let snapshot = try decoder.decode(Snapshot.self, from: data)
            self = .snapshot(version: snapshot.version, navigation: snapshot.navigation)
        case "present": self = .present(try decoder.decode(Present.self, from: data))
        case "dismiss":
            let dismiss = try decoder.decode(Dismiss.self, from: data)
            self = .dismiss(id: dismiss.id, origin: dismiss.origin)
        case "push": self = .push(try decoder.decode(Push.self, from: data))
        case "pop":
            let pop = try decoder.decode(Pop.self, from: data)
            self = .pop(stack: pop.stack, ids: pop.ids, origin: pop.origin)
        case "state":
            let state = try decoder.decode(State.self, from: data)
            self = .state(feature: state.feature, changes: state.changes)
        case "end": self = .end(reason: try decoder.decode(End.self, from: data).reason)
        default: return nil
        }
    }
}

/// An event that does not fit the tree the client holds (out of API.md's order, or naming
/// what is not on screen). The client then starts over from a fresh snapshot.
public struct MirrorError: Error, CustomStringConvertible, Sendable {
    public let description: String
}
