/// A type with one obvious way to travel as JSON, so a field of it needs no codec written out:
/// `Field("count", \.count)`. A field that needs more (a range, a feature's codec) names its codec.
public protocol StateValue {
    /// How values of this type are coded in state.
    static var stateCodec: StateCodec<Self> { get }
}

extension Int: StateValue {
    /// ``StateCodec/int``.
    public static var stateCodec: StateCodec<Int> { .int }
}

extension Bool: StateValue {
    /// ``StateCodec/bool``.
    public static var stateCodec: StateCodec<Bool> { .bool }
}

extension String: StateValue {
    /// ``StateCodec/string``.
    public static var stateCodec: StateCodec<String> { .string }
}

extension Double: StateValue {
    /// Any number: ``StateCodec/double``.
    public static var stateCodec: StateCodec<Double> { .double }
}

extension Optional: StateValue where Wrapped: StateValue {
    /// `null` or the wrapped value.
    public static var stateCodec: StateCodec<Wrapped?> { .optional(Wrapped.stateCodec) }
}

extension Array: StateValue where Element: StateValue {
    /// An array of the element's values.
    public static var stateCodec: StateCodec<[Element]> { .array(Element.stateCodec) }
}
