/// Why the engine refused a request. Every refusal leaves the session unchanged.
public enum NavigationError: Error, Sendable, Equatable {
    /// The named feature, presentation, stack or element is not on screen (anymore): a stale target.
    case notOnScreen(kind: String, id: String)
    /// `POST /sessions` named a feature the catalog does not have.
    case unknownFeature(String)
    /// `POST /sessions` named a feature that is shown only inside another (`hostable: false`).
    case notHostable(String)
    /// The feature has no action of that name.
    case unknownAction(feature: String, action: String)
    /// The feature has no field of that name.
    case unknownBinding(feature: String, name: String)
    /// The field exists but clients may not write it.
    case readOnlyBinding(feature: String, name: String)
    /// The presentation has no button of that id.
    case unknownButton(presentation: String, button: String)
    /// An argument, binding value, push value or state that does not decode; names the JSON path.
    case invalidArgument(StateError)
    /// A state (a deep link) that does not decode; names the JSON path.
    case invalidState(StateError)
    /// A pop count outside 1…depth.
    case invalidPop(String)
    /// The request would grow the session past one of its `SessionLimits`.
    case tooLarge(StateError)
    /// No stack enclosing the feature accepts the pushed value.
    case notAccepted(feature: String, value: String)
    /// The session ended (deleted or expired) while the request was on its way.
    case sessionEnded
    /// The change could not be made durable; the session is as it was.
    case storageUnavailable
    /// A deletion of the session is on its way to the store: the change was not made. Sent
    /// again, it is refused as for a session that ended, or made if the deletion failed.
    case sessionEnding
    /// `If-Match` named another version than the current one.
    case versionMismatch(expected: Int, current: Int)
    /// The sessions hold all the memory they may (`SessionLimits.memory`), and the change would
    /// grow this one's state.
    case memorySpent(limit: Int)

    /// How a transport should classify the refusal.
    public enum Kind: Sendable {
        /// A stale target (409).
        case conflict
        /// Input that does not fit (422).
        case invalid
        /// A version precondition that failed (412).
        case preconditionFailed
        /// The session is gone (404).
        case gone
        /// The server cannot take it now (503).
        case unavailable
    }

    /// Its class, for the transport's status.
    public var kind: Kind {
        switch self {
        case .notOnScreen: .conflict
        case .versionMismatch: .preconditionFailed
        case .sessionEnded: .gone
        case .storageUnavailable, .sessionEnding, .memorySpent: .unavailable
        default: .invalid
        }
    }

    /// A stable, machine-readable code.
    public var code: String {
        switch self {
        case .notOnScreen(let kind, _): kind == "presentation" ? "not_presented" : "not_on_screen"
        case .unknownFeature, .notHostable: "unknown_feature"
        case .unknownAction: "unknown_action"
        case .unknownBinding: "unknown_binding"
        case .readOnlyBinding: "read_only_binding"
        case .unknownButton: "unknown_button"
        case .invalidArgument: "invalid_argument"
        case .invalidState: "invalid_state"
        case .invalidPop: "invalid_pop"
        case .tooLarge: "state_too_large"
        case .notAccepted: "not_accepted"
        case .versionMismatch: "version_mismatch"
        case .sessionEnded: "session_not_found"
        case .storageUnavailable: "storage_unavailable"
        case .sessionEnding: "session_ending"
        case .memorySpent: "over_capacity"
        }
    }

    /// What went wrong, for people.
    public var message: String {
        switch self {
        case .notOnScreen(let kind, let id): "\(kind) \(id) is not on screen"
        case .unknownFeature(let name): "unknown feature \"\(name)\""
        case .notHostable(let name): "feature \"\(name)\" is shown only inside another (hostable: false in GET /features); start a session of a hostable one"
        case .unknownAction(let feature, let action): "\(feature) has no action \"\(action)\""
        case .unknownBinding(let feature, let name): "\(feature) has no field \"\(name)\""
        case .readOnlyBinding(let feature, let name): "\(feature).\(name) is not bindable"
        case .unknownButton(let presentation, let button): "presentation \(presentation) has no button \"\(button)\""
        case .invalidArgument(let error), .invalidState(let error), .tooLarge(let error): error.description
        case .invalidPop(let reason): reason
        case .notAccepted(let feature, let value): "no stack enclosing \(feature) accepts \(value)"
        case .versionMismatch(let expected, let current): "version is \(current), not \(expected)"
        case .sessionEnded: "the session has ended"
        case .storageUnavailable: "the change could not be stored; nothing changed, try again later"
        case .sessionEnding: "the session is being deleted; nothing changed, try again"
        case .memorySpent(let limit): "the server's sessions hold all the memory they may (\(limit) bytes) and this change would grow "
            + "the session's state; nothing changed: try again later, or make a change that does not add to it"
        }
    }
}
