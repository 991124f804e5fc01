/// One field of a feature's state as clients see it.
///
/// A field either belongs to the feature's own state (a count, a toggle) or holds child features
/// (a destination, a path); the second kind appears in the navigation tree as child nodes, not in
/// the node's `state`, but both are part of the feature's full encoded state.
public struct Field<Subject>: Sendable {
    /// Its key in the state's JSON.
    public let name: String
    /// What its values look like, from its codec.
    public let schema: StateSchema
    /// The type as `GET /features` lists it.
    public var typeName: String { schema.typeName }
    /// Clients may write it through `PUT …/bindings/{name}` (a text field, a toggle).
    public let isBindable: Bool
    /// Holds child features, which the tree shows as presentations or stack elements.
    public let holdsChildren: Bool
    /// Coded only by the library's own codecs (`StateCodec.isStructural`).
    let isStructural: Bool
    let encode: @Sendable (Subject) -> JSON
    /// Decodes against the value in place, so child models keep their identity.
    let assign: @Sendable (inout Subject, JSON, JSONPath) throws(StateError) -> Void
    /// Puts back the default, for a replacing deep link that leaves the field out.
    let reset: @Sendable (inout Subject, Subject) -> Void

    /// A field of the feature's own state, coded by `codec`.
    ///
    /// - Parameter bindable: clients may write it through `PUT …/bindings/{name}`.
    public init<Value>(
        _ name: String,
        _ keyPath: WritableKeyPath<Subject, Value> & Sendable,
        _ codec: StateCodec<Value>,
        bindable: Bool = false
    ) {
        self.init(name: name, keyPath: keyPath, codec: codec, isBindable: bindable, holdsChildren: false)
    }

    /// A field of the feature's own state, coded as its type is (``StateValue``).
    ///
    /// - Parameter bindable: clients may write it through `PUT …/bindings/{name}`.
    public init<Value: StateValue>(_ name: String, _ keyPath: WritableKeyPath<Subject, Value> & Sendable, bindable: Bool = false) {
        self.init(name, keyPath, Value.stateCodec, bindable: bindable)
    }

    /// A field whose value holds child features: what a presentation or stack slot shows.
    static func children<Value>(
        _ name: String,
        _ keyPath: WritableKeyPath<Subject, Value> & Sendable,
        _ codec: StateCodec<Value>
    ) -> Field {
        Field(name: name, keyPath: keyPath, codec: codec, isBindable: false, holdsChildren: true)
    }

    init(
        name: String,
        schema: StateSchema,
        encode: @escaping @Sendable (Subject) -> JSON,
        assign: @escaping @Sendable (inout Subject, JSON, JSONPath) throws(StateError) -> Void,
        reset: @escaping @Sendable (inout Subject, Subject) -> Void
    ) {
        self.name = name
        self.schema = schema
        self.isBindable = false
        self.holdsChildren = false
        self.isStructural = false
        self.encode = encode
        self.assign = assign
        self.reset = reset
    }

    private init<Value>(
        name: String,
        keyPath: WritableKeyPath<Subject, Value> & Sendable,
        codec: StateCodec<Value>,
        isBindable: Bool,
        holdsChildren: Bool
    ) {
        self.name = name
        self.schema = codec.schema
        self.isBindable = isBindable
        self.holdsChildren = holdsChildren
        self.isStructural = codec.isStructural
        self.encode = { subject in codec.encode(subject[keyPath: keyPath]) }
        self.assign = { subject, json, path throws(StateError) in
            subject[keyPath: keyPath] = try codec.decode(json, path, subject[keyPath: keyPath])
        }
        self.reset = { subject, defaults in subject[keyPath: keyPath] = defaults[keyPath: keyPath] }
    }
}
