/// How a client shows a presented feature. Models never know it; screens declare it.
public enum PresentationStyle: String, Sendable, CaseIterable {
    case alert, confirmationDialog, sheet, popover, fullScreenCover, drillDown
}

/// The content of an alert or confirmation dialog, derived from its owner's state.
public struct AlertContent: Sendable, Equatable {
    public var title: String
    public var message: String?
    public var buttons: [AlertButton]

    public init(title: String, message: String? = nil, buttons: [AlertButton]) {
        self.title = title
        self.message = message
        self.buttons = buttons
    }

    var json: JSON {
        .object(JSONObject([
            ("title", .string(title)),
            ("message", message.map(JSON.string) ?? .null),
            ("buttons", .array(buttons.map(\.json))),
        ]))
    }
}

public struct AlertButton: Sendable, Equatable {
    public enum Role: String, Sendable { case cancel, destructive }

    /// The lowercased label, which clients send back as `{"button": id}`.
    public var id: String { label.lowercased() }
    public var label: String
    public var role: Role?
    /// The owner's action this button sends before the alert is dismissed.
    public var action: String?

    public init(_ label: String, role: Role? = nil) {
        self.label = label
        self.role = role
        self.action = nil
    }

    /// A button that sends `action`: the declared action itself, never a second spelling of
    /// its name that could drift from it.
    public init<Owner>(_ label: String, role: Role? = nil, action: Action<Owner>) {
        self.label = label
        self.role = role
        self.action = action.name
    }

    var json: JSON {
        .object(JSONObject([("id", .string(id)), ("label", .string(label)), ("role", role.map { .string($0.rawValue) } ?? .null)]))
    }
}
