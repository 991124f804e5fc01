/// The shape of a value in the state encoding, as its codec declares it.
///
/// Every codec carries one, so what `GET /features` lists as a field's type and what a typed
/// contract (`openapi.yaml`'s per-feature state schemas) says about it come from the declaration
/// that also decodes the value: the description cannot claim what the decoder does not do.
public indirect enum StateSchema: Sendable {
    /// A whole number, within `range` when the codec checks one.
    case integer(ClosedRange<Int>?)
    /// A number, within `range` when the codec checks one.
    case number(ClosedRange<Double>?)
    /// `true` or `false`.
    case boolean
    /// A string, one of `allowed` when the codec accepts only those.
    case string(allowed: [String]?)
    /// `null` or absent is `nil`.
    case optional(StateSchema)
    /// An array of elements of one schema.
    case array(StateSchema)
    /// An enum: an object with exactly one key, the case name, holding the case's payload.
    case oneOf(String, cases: [(name: String, payload: StateSchema)])
    /// A feature's whole state, as its screen declares it; a screen may contain itself.
    case feature(any DescribableScreen)
    /// An array of a `Codable` value whose elements the declarations do not describe.
    case anyArray
    /// An object whose keys the declarations do not describe.
    case anyObject
    /// Any JSON value (a `Codable` optional whose default is `nil` says nothing of its type).
    case any

    /// The type as `GET /features` lists it: `integer`, `string?`, `[Path]`, `Network`.
    public var typeName: String {
        switch self {
        case .integer: "integer"
        case .number: "number"
        case .boolean: "boolean"
        case .string: "string"
        case .optional(let wrapped): wrapped.typeName + "?"
        case .array(let element): "[\(element.typeName)]"
        case .oneOf(let name, _): name
        case .feature(let screen): screen.name
        case .anyArray: "array"
        case .anyObject: "object"
        case .any: "any"
        }
    }
}
