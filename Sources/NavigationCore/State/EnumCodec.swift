/// One case of an enum with an associated value, as a single-key JSON object: `{"fact":{"value":"…"}}`.
public struct EnumCase<Enum>: Sendable {
    /// The case's name: the single key of its JSON object.
    public let name: String
    let payloadSchema: StateSchema
    let payloadIsStructural: Bool
    let extractJSON: @Sendable (Enum) -> JSON?
    let decodePayload: @Sendable (JSON, JSONPath, Enum?) throws(StateError) -> Enum

    /// - Parameters:
    ///   - embed: builds the enum value from its payload, as `Destination.fact`.
    ///   - extract: the payload when the value is this case.
    public init<Payload>(
        _ name: String,
        _ payload: StateCodec<Payload>,
        embed: @escaping @Sendable (Payload) -> Enum,
        extract: @escaping @Sendable (Enum) -> Payload?
    ) {
        self.name = name
        self.payloadSchema = payload.schema
        self.payloadIsStructural = payload.isStructural
        self.extractJSON = { value in extract(value).map(payload.encode) }
        self.decodePayload = { json, path, existing throws(StateError) in
            embed(try payload.decode(json, path, existing.flatMap(extract)))
        }
    }
}

extension StateCodec {
    /// An enum encoded as an object with exactly one key, the case name.
    public static func oneOf(_ typeName: String, _ cases: [EnumCase<Value>]) -> StateCodec {
        let names = cases.map(\.name).joined(separator: ", ")
        return StateCodec(schema: .oneOf(typeName, cases: cases.map { ($0.name, $0.payloadSchema) }), encode: { value in
            for enumCase in cases {
                if let payload = enumCase.extractJSON(value) { return .object(JSONObject([(enumCase.name, payload)])) }
            }
            return .null
        }, decode: { json, path, existing throws(StateError) in
            guard case .object(let object) = json else {
                throw .typeMismatch(path, expected: "an object with one of the keys \(names)", found: json)
            }
            guard object.count == 1, let (key, payload) = object.pairs.first.map({ ($0.key, $0.value) }) else {
                throw StateError(path, "expected exactly one of the keys \(names)")
            }
            guard let enumCase = cases.first(where: { $0.name == key }) else {
                throw StateError(path.appending(key), "unknown case; expected one of \(names)")
            }
            return try enumCase.decodePayload(payload, path.appending(key), existing)
        }).structural(cases.allSatisfy(\.payloadIsStructural))
    }
}
