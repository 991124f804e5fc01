/// What makes a presented item "the same" from one state to the next (rule 1): the item's `id`,
/// else the model object, else the value itself. Same identity means `state` events; a new one
/// means dismiss and present.
public enum Identity: Sendable, Equatable {
    /// Presented while a Bool is true, or while a binding unwraps: there is only ever one.
    case presence
    /// A model, by object: the same instance is the same presentation.
    case object(ObjectIdentifier)
    /// A value, by its JSON (or its `id`).
    case value(JSON)

    /// An item's `id`.
    public static func id(_ id: String) -> Identity { .value(.string(id)) }
}

/// A feature with no state of its own, shown while a Bool is true (an alert, a placeholder screen).
public struct Presence: Sendable, Equatable {
    /// The one value there is.
    public init() {}
}
