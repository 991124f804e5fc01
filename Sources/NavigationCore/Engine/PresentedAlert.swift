/// An alert as the engine keeps it on its node: what clients are shown, and the action each
/// button sends. Untyped, since a tree holds the alerts of every kind of owner; the typing is
/// checked where the alert is declared (`AlertContent`).
struct PresentedAlert: Sendable, Equatable {
    /// A button's id, and the owner's action it sends, if any.
    struct Button: Sendable, Equatable {
        let id: String
        let action: String?
    }

    /// The `alert` of a `present` event.
    let json: JSON
    let buttons: [Button]
}
