/// How a client shows a presented feature. Models never know it; screens declare it.
public enum PresentationStyle: String, Sendable, CaseIterable {
    /// A modal alert with buttons.
    case alert
    /// A sheet of buttons from the bottom (an action sheet).
    case confirmationDialog
    /// A card over the owner, dismissed by a swipe down.
    case sheet
    /// A bubble pointing at a control (its `anchor`).
    case popover
    /// A modal screen covering everything.
    case fullScreenCover
    /// Pushed like a stack element, but driven by optional state.
    case drillDown
}

/// The content of an alert or confirmation dialog, derived from its owner's state.
public struct AlertContent: Sendable, Equatable {
    /// The title.
    public var title: String
    /// The text under the title, if any.
    public var message: String?
    /// The buttons, in order.
    public var buttons: [AlertButton]

    /// Content with a title, an optional message and its buttons.
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

/// A button of an alert or confirmation dialog; tapping it dismisses the alert.
public struct AlertButton: Sendable, Equatable {
    /// How clients draw it.
    public enum Role: String, Sendable {
        /// Dismisses without doing anything.
        case cancel
        /// Destroys something (drawn in red).
        case destructive
    }

    /// What clients send back as `{"button": id}`: the lowercased label unless given. Give one
    /// where the label may change (a translation, a rewording) and clients must not notice.
    public var id: String
    /// The text on the button.
    public var label: String
    /// Its role; nil for a plain button.
    public var role: Role?
    /// The owner's action this button sends before the alert is dismissed.
    public var action: String?

    /// A button that only dismisses.
    public init(_ label: String, id: String? = nil, role: Role? = nil) {
        self.id = id ?? label.lowercased()
        self.label = label
        self.role = role
        self.action = nil
    }

    /// A button that sends `action`: the declared action itself, never a second spelling of
    /// its name that could drift from it.
    public init<Owner>(_ label: String, id: String? = nil, role: Role? = nil, action: Action<Owner>) {
        self.id = id ?? label.lowercased()
        self.label = label
        self.role = role
        self.action = action.name
    }

    var json: JSON {
        .object(JSONObject([("id", .string(id)), ("label", .string(label)), ("role", role.map { .string($0.rawValue) } ?? .null)]))
    }
}

extension AlertButton {
    /// "OK", which only dismisses: the one button of an alert that informs.
    public static var ok: AlertButton { AlertButton("OK", role: .cancel) }
    /// "Cancel", which only dismisses: the way out of a confirmation.
    public static var cancel: AlertButton { AlertButton("Cancel", role: .cancel) }
}
