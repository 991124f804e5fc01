/// An optional enum destination declared once: each case names its payload's screen, its style
/// and how to get in and out of the enum, and both the state field (its codec) and the
/// presentation slots are made from that one declaration, so they can never disagree.
///
/// Slots are named `<field>.<case>` (`destination.fact`), the contract's spelling.
public struct DestinationField<Owner, Value>: Sendable {
    /// The state field, holding children. A `ScreenBuilder` block declares it with the slots.
    let field: Field<Owner>
    /// One slot per case.
    let slots: [PresentationSlot<Owner>]

    /// - Parameters:
    ///   - name: the field's name, `destination`.
    ///   - typeName: the enum's name as clients see it in errors.
    public init(_ name: String, _ keyPath: WritableKeyPath<Owner, Value?> & Sendable, typeName: String = "Destination",
                _ cases: [Case]) {
        field = .children(name, keyPath, .optional(.oneOf(typeName, cases.map(\.enumCase))))
        slots = cases.map { $0.slot("\(name).\($0.enumCase.name)", keyPath) }
    }

    /// One case of the destination enum.
    public struct Case: Sendable {
        let enumCase: EnumCase<Value>
        let slot: @Sendable (String, WritableKeyPath<Owner, Value?> & Sendable) -> PresentationSlot<Owner>

        /// A case holding a child model, identified by the object.
        ///
        /// - Parameters:
        ///   - embed: the case constructor, as `Destination.settings`.
        ///   - extract: the model when the value is this case.
        public static func model<Child: AnyObject>(
            _ name: String,
            style: PresentationStyle,
            _ screen: Screen<Child>,
            anchor: String? = nil,
            embed: @escaping @Sendable (Child) -> Value,
            extract: @escaping @Sendable (Value) -> Child?
        ) -> Case {
            Case(enumCase: EnumCase(name, screen.codec, embed: embed, extract: extract)) { slotName, keyPath in
                .model(slotName, style: style, screen, anchor: anchor, field: nil,
                       unwrap: { $0[keyPath: keyPath].flatMap(extract) }, dismiss: { $0[keyPath: keyPath] = nil })
            }
        }

        /// A case holding a plain value; a presented value reads and writes through its owner.
        ///
        /// - Parameters:
        ///   - alert: the content of an alert or dialog, from the owner and the value; new text is
        ///     a new presentation (``PresentationSlot/isPresented(_:style:_:screen:anchor:bindable:alert:)``).
        ///   - identity: what makes it a different presentation; by default rule 1's: the value's
        ///     `id` when its state has one, else the value itself.
        public static func value<Child>(
            _ name: String,
            style: PresentationStyle,
            _ screen: Screen<Child>,
            anchor: String? = nil,
            alert: (@Sendable (Owner, Child) -> AlertContent<Owner>)? = nil,
            identity: (@Sendable (Child) -> Identity)? = nil,
            embed: @escaping @Sendable (Child) -> Value,
            extract: @escaping @Sendable (Value) -> Child?
        ) -> Case {
            Case(enumCase: EnumCase(name, screen.codec, embed: embed, extract: extract)) { slotName, keyPath in
                .value(slotName, style: style, screen, anchor: anchor, field: nil,
                       identity: identity ?? screen.defaultIdentity, alert: alert,
                       unwrap: { $0[keyPath: keyPath].flatMap(extract) },
                       embed: { $0[keyPath: keyPath] = embed($1) },
                       dismiss: { $0[keyPath: keyPath] = nil })
            }
        }
    }
}
