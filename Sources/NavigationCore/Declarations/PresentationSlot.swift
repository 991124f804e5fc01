/// A place in a feature's state that, while it holds something, puts a child on screen in a
/// given style: a Bool that is true, an optional that is non-nil, an enum in one of its cases.
public struct PresentationSlot<Owner>: Sendable {
    /// As clients see it: `destination.fact`, `forgetAlert`.
    public let name: String
    /// How the child is presented.
    public let style: PresentationStyle
    /// The presented feature's screen, so the catalog can be derived by walking the declarations.
    public let screen: any DescribableScreen
    /// The presented feature's name.
    public var feature: String { screen.name }
    /// The control a popover points at.
    public let anchor: String?
    let current: @Sendable (Owner, Access<Owner>) -> PresentedChild?
    /// Writes `nil`/`false` back: what a user's dismissal does to the state.
    let dismiss: @Sendable (inout Owner) -> Void

    /// A child model held in optional or enum state; identified by the object.
    public static func model<Child: AnyObject>(
        _ name: String,
        style: PresentationStyle,
        _ screen: Screen<Child>,
        anchor: String? = nil,
        unwrap: @escaping @Sendable (Owner) -> Child?,
        dismiss: @escaping @Sendable (inout Owner) -> Void
    ) -> PresentationSlot {
        PresentationSlot(name: name, style: style, screen: screen, anchor: anchor, current: { owner, _ in
            guard let child = unwrap(owner) else { return nil }
            return PresentedChild(identity: .object(ObjectIdentifier(child)), alert: nil) {
                LiveFeature(screen, access: .model(child))
            }
        }, dismiss: dismiss)
    }

    /// A child value held in the owner's state. The child reads and writes through its owner, so a
    /// binding on the presented feature edits the owner's state directly.
    public static func value<Child>(
        _ name: String,
        style: PresentationStyle,
        _ screen: Screen<Child>,
        anchor: String? = nil,
        identity: @escaping @Sendable (Child) -> Identity,
        alert: (@Sendable (Owner, Child) -> AlertContent)? = nil,
        unwrap: @escaping @Sendable (Owner) -> Child?,
        embed: @escaping @Sendable (inout Owner, Child) -> Void,
        dismiss: @escaping @Sendable (inout Owner) -> Void
    ) -> PresentationSlot {
        PresentationSlot(name: name, style: style, screen: screen, anchor: anchor, current: { owner, ownerAccess in
            guard let child = unwrap(owner) else { return nil }
            return PresentedChild(identity: identity(child), alert: alert?(owner, child)) {
                LiveFeature(screen, access: Access(
                    read: { ownerAccess.read().flatMap(unwrap) },
                    write: { newChild in ownerAccess.modify { embed(&$0, newChild) } }
                ))
            }
        }, dismiss: dismiss)
    }

    /// Shown while a Bool is true: an alert, a confirmation dialog, a placeholder screen.
    public static func isPresented(
        _ name: String,
        style: PresentationStyle,
        _ keyPath: WritableKeyPath<Owner, Bool> & Sendable,
        screen: Screen<Presence>,
        anchor: String? = nil,
        alert: (@Sendable (Owner) -> AlertContent)? = nil
    ) -> PresentationSlot {
        value(
            name, style: style, screen, anchor: anchor, identity: { _ in .presence },
            alert: alert.map { content in { owner, _ in content(owner) } },
            unwrap: { $0[keyPath: keyPath] ? Presence() : nil },
            embed: { _, _ in },
            dismiss: { $0[keyPath: keyPath] = false }
        )
    }

    /// Shown while an optional item is non-nil, written back through the optional.
    public static func item<Child>(
        _ name: String,
        style: PresentationStyle,
        _ keyPath: WritableKeyPath<Owner, Child?> & Sendable,
        screen: Screen<Child>,
        anchor: String? = nil,
        identity: @escaping @Sendable (Child) -> Identity,
        alert: (@Sendable (Owner, Child) -> AlertContent)? = nil
    ) -> PresentationSlot {
        value(
            name, style: style, screen, anchor: anchor, identity: identity, alert: alert,
            unwrap: { $0[keyPath: keyPath] },
            embed: { $0[keyPath: keyPath] = $1 },
            dismiss: { $0[keyPath: keyPath] = nil }
        )
    }
}

/// What a slot shows right now.
struct PresentedChild {
    let identity: Identity
    let alert: AlertContent?
    let makeFeature: () -> any AnyLiveFeature
}
