/// A place in a feature's state that, while it holds something, puts a child on screen in a
/// given style: a Bool that is true, an optional that is non-nil, an enum in one of its cases.
public struct PresentationSlot<Owner>: Sendable {
    /// As clients see it: `destination.fact`, `forgetAlertIsPresented`.
    public let name: String
    /// How the child is presented.
    public let style: PresentationStyle
    /// The presented feature's screen, so the catalog can be derived by walking the declarations.
    public let screen: any DescribableScreen
    /// The presented feature's name.
    public var feature: String { screen.name }
    /// The control a popover points at.
    public let anchor: String?
    /// The state field it presents from, declared with it; nil where the slot is one case of
    /// a field declared elsewhere (``DestinationField``).
    let field: Field<Owner>?
    let current: @Sendable (Owner, Access<Owner>) -> PresentedChild?
    /// Writes `nil`/`false` back: what a user's dismissal does to the state.
    let dismiss: @Sendable (inout Owner) -> Void

    /// Shown while a Bool is true: an alert, a confirmation dialog, a placeholder screen. The Bool
    /// is also the state field `name`.
    ///
    /// - Parameters:
    ///   - bindable: clients may also write the Bool through `PUT …/bindings/{name}`.
    ///   - alert: the content of an alert or dialog, from the owner's state. Its text is part of
    ///     what is on screen, and no event edits a presentation in place: when the text changes
    ///     while it is shown, the alert is dismissed and presented anew, with a new id, so a button
    ///     tapped on the old text gets 409 and does nothing. A confirmation then never applies to
    ///     what its user did not read.
    public static func isPresented(
        _ name: String,
        style: PresentationStyle,
        _ keyPath: WritableKeyPath<Owner, Bool> & Sendable,
        screen: Screen<Presence>,
        anchor: String? = nil,
        bindable: Bool = false,
        alert: (@Sendable (Owner) -> AlertContent<Owner>)? = nil
    ) -> PresentationSlot {
        value(
            name, style: style, screen, anchor: anchor, field: Field(name, keyPath, .bool, bindable: bindable),
            identity: { _ in .presence },
            alert: alert.map { content in { owner, _ in content(owner) } },
            unwrap: { $0[keyPath: keyPath] ? Presence() : nil },
            embed: { _, _ in },
            dismiss: { $0[keyPath: keyPath] = false }
        )
    }

    /// Shown while an optional value is non-nil, written back through the optional, which is
    /// also the state field `name`.
    ///
    /// - Parameters:
    ///   - ownerCodec: how the owner's state codes the value, where not as the screen's state (a
    ///     text edited in a sheet is a string in its owner and `{"text": …}` on its own screen).
    ///   - alert: the content of an alert or dialog, from the owner and the value (a trailing
    ///     closure is this); new text is a new presentation, as with ``isPresented(_:style:_:screen:anchor:bindable:alert:)``.
    ///   - identity: what makes it a different presentation; by default rule 1's: a model's
    ///     object, a value's `id`; without one, a value whose screen binds a field (a sheet that
    ///     edits the very text it unwraps) is keyed by its presence, so typing never re-presents
    ///     it, and any other by the value itself.
    public static func item<Child>(
        _ name: String,
        style: PresentationStyle,
        _ keyPath: WritableKeyPath<Owner, Child?> & Sendable,
        screen: Screen<Child>,
        anchor: String? = nil,
        ownerCodec: StateCodec<Child>? = nil,
        alert: (@Sendable (Owner, Child) -> AlertContent<Owner>)? = nil,
        identity: (@Sendable (Child) -> Identity)? = nil
    ) -> PresentationSlot {
        value(
            name, style: style, screen, anchor: anchor,
            field: .children(name, keyPath, .optional(ownerCodec ?? screen.codec)),
            identity: identity ?? screen.unwrappedIdentity, alert: alert,
            unwrap: { $0[keyPath: keyPath] },
            embed: { $0[keyPath: keyPath] = $1 },
            dismiss: { $0[keyPath: keyPath] = nil }
        )
    }

    /// Shown while an optional child model is non-nil; identified by the object. The optional
    /// is also the state field `name`.
    public static func model<Child: AnyObject>(
        _ name: String,
        style: PresentationStyle,
        _ keyPath: WritableKeyPath<Owner, Child?> & Sendable,
        screen: Screen<Child>,
        anchor: String? = nil
    ) -> PresentationSlot {
        model(name, style: style, screen, anchor: anchor, field: .children(name, keyPath, .optional(screen.codec)),
              unwrap: { $0[keyPath: keyPath] }, dismiss: { $0[keyPath: keyPath] = nil })
    }

    /// A child model held in optional or enum state; identified by the object.
    static func model<Child: AnyObject>(
        _ name: String,
        style: PresentationStyle,
        _ screen: Screen<Child>,
        anchor: String?,
        field: Field<Owner>?,
        unwrap: @escaping @Sendable (Owner) -> Child?,
        dismiss: @escaping @Sendable (inout Owner) -> Void
    ) -> PresentationSlot {
        PresentationSlot(name: name, style: style, screen: screen, anchor: anchor, field: field, current: { owner, _ in
            guard let child = unwrap(owner) else { return nil }
            return PresentedChild(identity: .object(ObjectIdentifier(child)), alert: nil) {
                LiveFeature(screen, access: .model(child))
            }
        }, dismiss: dismiss)
    }

    /// A child value held in the owner's state. The child reads and writes through its owner, so a
    /// binding on the presented feature edits the owner's state directly.
    static func value<Child>(
        _ name: String,
        style: PresentationStyle,
        _ screen: Screen<Child>,
        anchor: String?,
        field: Field<Owner>?,
        identity: @escaping @Sendable (Child) -> Identity,
        alert: (@Sendable (Owner, Child) -> AlertContent<Owner>)?,
        unwrap: @escaping @Sendable (Owner) -> Child?,
        embed: @escaping @Sendable (inout Owner, Child) -> Void,
        dismiss: @escaping @Sendable (inout Owner) -> Void
    ) -> PresentationSlot {
        PresentationSlot(name: name, style: style, screen: screen, anchor: anchor, field: field, current: { owner, ownerAccess in
            guard let child = unwrap(owner) else { return nil }
            return PresentedChild(identity: identity(child), alert: alert?(owner, child).presented) {
                LiveFeature(screen, access: Access(
                    read: { ownerAccess.read().flatMap(unwrap) },
                    write: { newChild in ownerAccess.modify { embed(&$0, newChild) } }
                ))
            }
        }, dismiss: dismiss)
    }
}

extension Screen {
    /// Rule 1 for a value presented by unwrapping an optional: its `id` when it has one (an edit
    /// never changes it); without one, edited through a binding of its screen, it is the same
    /// presentation for as long as it is there (its edits write straight back into the
    /// optional, and must not dismiss and present it again); otherwise the whole value.
    var unwrappedIdentity: @Sendable (Subject) -> Identity {
        // The body is read when first asked, not now: a recursive screen's is declared after
        // this slot.
        identity { [self] state in body.fields.contains(where: \.isBindable) ? .presence : .value(state) }
    }

    /// Rule 1 for a presentation that declares no identity: a model is its object; a value is its
    /// `id` when its state has one, else the whole value.
    var defaultIdentity: @Sendable (Subject) -> Identity {
        identity { .value($0) }
    }

    /// A model's object; a value's `id` when its state has one, else what `withoutID` makes of
    /// its state.
    private func identity(withoutID: @escaping @Sendable (JSON) -> Identity) -> @Sendable (Subject) -> Identity {
        if Subject.self is AnyClass {
            return { .object(ObjectIdentifier($0 as AnyObject)) }
        }
        let codec = codec
        return { child in
            let state = codec.encode(child)
            if case .object(let fields) = state, let id = fields["id"] { return .value(id) }
            return withoutID(state)
        }
    }
}

/// What a slot shows right now.
struct PresentedChild {
    let identity: Identity
    let alert: PresentedAlert?
    let makeFeature: () -> any AnyLiveFeature
}
