/// The content of an alert or confirmation dialog, derived from its owner's state.
///
/// Typed by the owner, so a button can only send an action the owner declares: a button
/// naming another feature's action does not compile, where it would otherwise fail only when a
/// user taps it.
public struct AlertContent<Owner>: Sendable, Equatable {
    /// The title.
    public var title: String
    /// The text under the title, if any.
    public var message: String?
    /// The buttons, in order.
    public var buttons: [AlertButton<Owner>]

    /// Content with a title, an optional message and its buttons.
    public init(title: String, message: String? = nil, buttons: [AlertButton<Owner>]) {
        self.title = title
        self.message = message
        self.buttons = buttons
    }

    /// As the engine keeps it, whatever its owner.
    var presented: PresentedAlert {
        PresentedAlert(
            json: .object(JSONObject([
                ("title", .string(title)),
                ("message", message.map(JSON.string) ?? .null),
                ("buttons", .array(buttons.map(\.json))),
            ])),
            buttons: buttons.map { PresentedAlert.Button(id: $0.id, action: $0.action) })
    }
}

/// How a client draws an alert button.
public enum AlertButtonRole: String, Sendable {
    /// Dismisses without doing anything.
    case cancel
    /// Destroys something (drawn in red).
    case destructive
}

/// A button of an alert or confirmation dialog; tapping it dismisses the alert.
public struct AlertButton<Owner>: Sendable, Equatable {
    /// What clients send back as `{"button": id}`: the lowercased label unless given. Give one
    /// where the label may change (a translation, a rewording) and clients must not notice.
    public var id: String
    /// The text on the button.
    public var label: String
    /// Its role; nil for a plain button.
    public var role: AlertButtonRole?
    /// The name of the owner's action this button sends before the alert is dismissed.
    public private(set) var action: String?

    /// A button that only dismisses.
    public init(_ label: String, id: String? = nil, role: AlertButtonRole? = nil) {
        self.id = id ?? label.lowercased()
        self.label = label
        self.role = role
        self.action = nil
    }

    /// A button that sends `action`: the owner's declared action itself, never a second
    /// spelling of its name that could drift from it.
    public init(_ label: String, id: String? = nil, role: AlertButtonRole? = nil, action: Action<Owner>) {
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
