/// Gathers a screen's declarations from a block, in the order written: fields encode in that
/// order, slots are listed in it.
///
/// A slot that presents from a field of its own (``PresentationSlot/isPresented(_:style:_:screen:anchor:bindable:alert:)``,
/// a ``StackSlot``, a ``DestinationField``) declares that field too, at its place in the
/// block, so the state and the slot are written once and cannot disagree.
@resultBuilder
public enum ScreenBuilder<Subject> {
    /// A field of the feature's own state.
    public static func buildExpression(_ field: Field<Subject>) -> ScreenBody<Subject> {
        var body = ScreenBody<Subject>()
        body.fields = [field]
        return body
    }

    /// An action.
    public static func buildExpression(_ action: Action<Subject>) -> ScreenBody<Subject> {
        var body = ScreenBody<Subject>()
        body.actions = [action]
        return body
    }

    /// A presentation slot, with its field.
    public static func buildExpression(_ slot: PresentationSlot<Subject>) -> ScreenBody<Subject> {
        var body = ScreenBody<Subject>()
        body.fields = slot.field.map { [$0] } ?? []
        body.presentations = [slot]
        return body
    }

    /// A navigation stack, with its field.
    public static func buildExpression(_ stack: StackSlot<Subject>) -> ScreenBody<Subject> {
        var body = ScreenBody<Subject>()
        body.fields = [stack.field]
        body.stacks = [stack]
        return body
    }

    /// An enum destination: its field, then a slot per case.
    public static func buildExpression<Value>(_ destination: DestinationField<Subject, Value>) -> ScreenBody<Subject> {
        var body = ScreenBody<Subject>()
        body.fields = [destination.field]
        body.presentations = destination.slots
        return body
    }

    /// What a restored session does about the effects that were running.
    public static func buildExpression(_ settle: Settle<Subject>) -> ScreenBody<Subject> {
        var body = ScreenBody<Subject>()
        body.settle = settle
        return body
    }

    /// The declarations in order.
    public static func buildBlock(_ parts: ScreenBody<Subject>...) -> ScreenBody<Subject> {
        buildArray(parts)
    }

    /// Declarations made in a loop, such as one slot per style.
    public static func buildArray(_ parts: [ScreenBody<Subject>]) -> ScreenBody<Subject> {
        var body = ScreenBody<Subject>()
        for part in parts { body.append(part) }
        return body
    }

    /// Declarations made under `if`.
    public static func buildOptional(_ part: ScreenBody<Subject>?) -> ScreenBody<Subject> {
        part ?? ScreenBody()
    }

    /// One branch of an `if`/`else`.
    public static func buildEither(first part: ScreenBody<Subject>) -> ScreenBody<Subject> { part }

    /// The other branch of an `if`/`else`.
    public static func buildEither(second part: ScreenBody<Subject>) -> ScreenBody<Subject> { part }
}
