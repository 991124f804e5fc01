import NavigationCore

extension Screen where Subject == Presence {
    /// An alert or confirmation dialog driven by a Bool: no state of its own; its content comes
    /// from the owner's state.
    static var alert: Screen<Presence> { Screen("alert", make: { Presence() }) }

    /// A plain screen shown while a Bool is true.
    static var page: Screen<Presence> { Screen("page", make: { Presence() }) }
}
