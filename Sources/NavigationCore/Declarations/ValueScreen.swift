extension Screen where Subject: Codable & Sendable {
    /// A plain value type's screen (a network, a fact) whose fields come from its `Codable`
    /// conformance, so no field list is written by hand and none can drift from the type.
    ///
    /// The rules are those of every screen: a key the state leaves out takes its value from
    /// `make`, a key the type does not have is refused with its JSON path. The fields are the
    /// keys `make()` encodes to, typed after its values; `refining` replaces the field of the
    /// same name with a declared one, for what `Codable` cannot say: a number within a range, or
    /// the type of an optional whose default is `nil` (listed as `any?` otherwise).
    public static func value(
        _ name: String,
        refining refinements: [Field<Subject>] = [],
        make: @escaping @Sendable () -> Subject
    ) -> Screen {
        guard case .object(let defaults) = JSONCoding.encode(make()) else {
            preconditionFailure("\(name): a value screen's type must encode as a JSON object")
        }
        let fields = defaults.pairs.map { key, value in
            refinements.first { $0.name == key } ?? Field.coded(key, schema: value.stateSchema)
        }
        let refined = refinements.filter { refinement in defaults.keys.contains(refinement.name) }
        let whole = WholeValueCoding<Subject>(
            encode: { subject in
                guard case .object(var object) = JSONCoding.encode(subject) else { return .null }
                for field in refined { object[field.name] = field.encode(subject) }
                return .object(object)
            },
            decode: { object, path throws(StateError) in
                guard case .object(var merged) = JSONCoding.encode(make()) else { return make() }
                for (key, value) in object.pairs { merged[key] = value }
                var subject = try JSONCoding.decode(Subject.self, .object(merged), at: path)
                for field in refined {
                    if let value = object[field.name] { try field.assign(&subject, value, path.appending(field.name)) }
                }
                return subject
            })
        return Screen(name, make: make) { _ in
            var body = ScreenBody<Subject>()
            body.fields = fields
            body.wholeValue = whole
            return body
        }
    }
}

extension Field where Subject: Codable & Sendable {
    /// One key of a `Codable` value: read from and written into the value's encoding.
    static func coded(_ name: String, schema: StateSchema) -> Field {
        Field(name: name, schema: schema,
              encode: { subject in JSONCoding.encode(subject)[name] ?? .null },
              assign: { subject, json, path throws(StateError) in
                  guard case .object(var object) = JSONCoding.encode(subject) else { return }
                  object[name] = json
                  subject = try JSONCoding.decode(Subject.self, .object(object), at: path.parent(removing: name))
              },
              reset: { subject, defaults in
                  guard case .object(var object) = JSONCoding.encode(subject),
                        let value = JSONCoding.encode(defaults)[name] else { return }
                  object[name] = value
                  if let reset = try? JSONCoding.decode(Subject.self, .object(object), at: JSONPath("")) { subject = reset }
              })
    }
}

extension JSON {
    /// The schema of a value like this one, as the state codecs declare theirs.
    fileprivate var stateSchema: StateSchema {
        switch self {
        case .int: .integer(nil)
        case .double: .number(nil)
        case .bool: .boolean
        case .string: .string(allowed: nil)
        case .array: .anyArray
        case .object: .anyObject
        // An optional whose default is `nil`: its type is not known from the value.
        case .null: .optional(.any)
        }
    }
}
