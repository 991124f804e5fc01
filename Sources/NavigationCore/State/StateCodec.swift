/// How one kind of value travels as JSON, in both directions.
///
/// Codecs compose (optional, array, enum, feature) so a feature's whole state, children included,
/// is described by declarations rather than hand-written coding. `decode` receives the value now
/// in place, so decoding a deep link into a running session updates models where they already are
/// instead of replacing them, and the reconciler sees only the difference.
public struct StateCodec<Value>: Sendable {
    /// What the values look like, for `GET /features` and the typed contract.
    public let schema: StateSchema
    /// The value as JSON.
    public let encode: @Sendable (Value) -> JSON
    /// The value from JSON at a path (for errors), given the value now in place.
    public let decode: @Sendable (JSON, JSONPath, Value?) throws(StateError) -> Value

    /// The type as `GET /features` lists it: `integer`, `string?`, `[Path]`, `Network`.
    public var typeName: String { schema.typeName }
    /// Built only from this library's codecs (numbers, strings, optional, array, oneOf, a
    /// screen's): it encodes the value itself and, for a model in it, what the model's screen
    /// encodes, which `EncodedStates` can follow. A codec written by hand may read what no one
    /// observes (a model's property, say), so an owner whose children it encodes is encoded
    /// afresh every time.
    private(set) var isStructural = false

    /// - Parameters:
    ///   - schema: what `decode` accepts; a contract generated from it must not promise more.
    ///   - encode: the value as JSON.
    ///   - decode: the value from JSON at a path (for errors), given the value now in place.
    public init(
        schema: StateSchema,
        encode: @escaping @Sendable (Value) -> JSON,
        decode: @escaping @Sendable (JSON, JSONPath, Value?) throws(StateError) -> Value
    ) {
        self.schema = schema
        self.encode = encode
        self.decode = decode
    }

    /// This codec, said to be built only from the library's own (`isStructural`).
    func structural(_ isStructural: Bool) -> StateCodec {
        var codec = self
        codec.isStructural = isStructural
        return codec
    }
}

extension StateCodec where Value == Int {
    /// An `Int`, from a JSON integer.
    public static let int = StateCodec(schema: .integer(nil), encode: { .int($0) }) { json, path, _ throws(StateError) in
        guard case .int(let value) = json else { throw .typeMismatch(path, expected: "an integer", found: json) }
        return value
    }.structural(true)

    /// A whole number within `range`, such as a rating from 0 to 5.
    public static func int(in range: ClosedRange<Int>) -> StateCodec {
        .int.bounded(to: range, schema: .integer(range))
    }
}

extension StateCodec where Value == Bool {
    /// A `Bool`.
    public static let bool = StateCodec(schema: .boolean, encode: { .bool($0) }) { json, path, _ throws(StateError) in
        guard case .bool(let value) = json else { throw .typeMismatch(path, expected: "a boolean", found: json) }
        return value
    }.structural(true)
}

extension StateCodec where Value == String {
    /// A `String`.
    public static let string = StateCodec(schema: .string(allowed: nil), encode: { .string($0) }) { json, path, _ throws(StateError) in
        guard case .string(let value) = json else { throw .typeMismatch(path, expected: "a string", found: json) }
        return value
    }.structural(true)
}

extension StateCodec where Value == Double {
    /// A `Double`, from any JSON number.
    public static let double = StateCodec(schema: .number(nil), encode: { .double($0) }) { json, path, _ throws(StateError) in
        switch json {
        case .double(let value): return value
        case .int(let value): return Double(value)
        default: throw .typeMismatch(path, expected: "a number", found: json)
        }
    }.structural(true)

    /// A number within `range`, such as a signal strength from 0 to 1.
    public static func double(in range: ClosedRange<Double>) -> StateCodec {
        .double.bounded(to: range, schema: .number(range))
    }
}

extension StateCodec where Value: Comparable & Sendable {
    /// This codec's values within `range`, which `schema` shows: one outside it is refused with
    /// its path.
    func bounded(to range: ClosedRange<Value>, schema: StateSchema) -> StateCodec {
        StateCodec(schema: schema, encode: encode) { [decode] json, path, existing throws(StateError) in
            let value = try decode(json, path, existing)
            guard range.contains(value) else {
                throw StateError(path, "must be between \(range.lowerBound) and \(range.upperBound)")
            }
            return value
        }.structural(isStructural)
    }
}

extension StateCodec {
    /// `null` or absent is `nil`.
    public static func optional<Wrapped>(_ wrapped: StateCodec<Wrapped>) -> StateCodec<Wrapped?> where Value == Wrapped? {
        StateCodec<Wrapped?>(schema: .optional(wrapped.schema), encode: { $0.map(wrapped.encode) ?? .null }) {
            json, path, existing throws(StateError) in
            if case .null = json { return nil }
            return try wrapped.decode(json, path, existing ?? nil)
        }.structural(wrapped.isStructural)
    }

    /// Elements decode against the element at the same index, so a path keeps its models.
    public static func array<Element>(_ element: StateCodec<Element>) -> StateCodec<[Element]> where Value == [Element] {
        StateCodec<[Element]>(schema: .array(element.schema), encode: { .array($0.map(element.encode)) }) {
            json, path, existing throws(StateError) in
            guard case .array(let items) = json else { throw .typeMismatch(path, expected: "an array", found: json) }
            var result: [Element] = []
            result.reserveCapacity(items.count)
            for (index, item) in items.enumerated() {
                let current = existing.flatMap { index < $0.count ? $0[index] : nil }
                result.append(try element.decode(item, path.appending(index: index), current))
            }
            return result
        }.structural(element.isStructural)
    }
}
