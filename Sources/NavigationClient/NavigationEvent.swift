import Foundation

/// Who removed a presentation or stack element: the server's state, or a user's dismissal or pop.
public enum RemovalOrigin: String, Sendable, Hashable, Codable {
    /// The state changed.
    case server
    /// A user dismissed or popped it (echoed to every subscriber).
    case client
}

/// One event of a session's stream, decoded from its `event:` name and `data:` JSON (API.md, "Events").
public enum NavigationEvent: Sendable, Hashable {
    /// `present`: a feature was presented; its own stacks are still empty.
    public struct Present: Sendable, Hashable, Decodable {
        /// The new presentation's id.
        public var id: String
        /// The owning feature instance (`root`, a presentation or a stack element).
        public var parent: String
        /// The owner's slot that presents it.
        public var slot: String
        /// How it is presented.
        public var style: PresentationStyle
        /// The presented screen's name.
        public var feature: String
        /// The presented feature's own fields.
        public var state: [String: JSONValue]
        /// Its own stacks, still without elements.
        public var stacks: [NavigationStack]
        /// An alert's or dialog's content.
        public var alert: AlertContent?
        /// The control a popover points at.
        public var anchor: String?
    }
    /// `push`: an element was pushed onto a stack; its own stacks are still empty.
    public struct Push: Sendable, Hashable, Decodable {
        /// The stack it was pushed onto.
        public var stack: String
        /// The new element's id.
        public var id: String
        /// Its position in the stack, 0 at the bottom.
        public var index: Int
        /// The element's screen name.
        public var feature: String
        /// The element's own fields.
        public var state: [String: JSONValue]
        /// Its own stacks, still without elements.
        public var stacks: [NavigationStack]
    }

    /// The whole tree at `version`: a client rebuilds its UI from it.
    case snapshot(version: Int, navigation: NavigationNode)
    /// A feature was presented.
    case present(Present)
    /// A presentation went away.
    case dismiss(id: String, origin: RemovalOrigin)
    /// An element was pushed.
    case push(Push)
    /// Elements left the end of a stack, topmost first.
    case pop(stack: String, ids: [String], origin: RemovalOrigin)
    /// A feature's own fields changed; only those fields.
    case state(feature: String, changes: [String: JSONValue])
    /// The session ended for good (`deleted`, `expired`, `shutdown`); the stream closes.
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
