/// Something a user does to a feature, named for the gesture: `incrementButtonTapped`.
public struct Action<Subject>: Sendable {
    /// Its name on the wire (`POST …/actions {"action": name}`), as `GET /features` lists it.
    public let name: String
    /// The arguments it takes, checked before it runs.
    public let parameters: [Parameter]
    let run: @Sendable (inout Subject, Arguments) throws(StateError) -> Effect?

    /// An argument an action takes, as `GET /features` lists it.
    public struct Parameter: Sendable {
        /// Its key in `args`.
        public let name: String
        /// What its values look like, from its codec.
        public let schema: StateSchema
        /// The type as `GET /features` lists it.
        public var typeName: String { schema.typeName }
        let validate: @Sendable (JSON, JSONPath) throws(StateError) -> Void

        /// An argument of any codec's type, decoded and checked before the action runs.
        init<Value>(_ name: String, _ codec: StateCodec<Value>) {
            self.name = name
            self.schema = codec.schema
            self.validate = { json, path throws(StateError) in _ = try codec.decode(json, path, nil) }
        }
    }

    /// A synchronous action without arguments.
    public static func sync(_ name: String, _ body: @escaping @Sendable (inout Subject) -> Void) -> Action {
        Action(name: name, parameters: []) { subject, _ throws(StateError) in
            body(&subject)
            return nil
        }
    }

    /// A synchronous action with one typed argument, resolved before `body` runs: a wrong type, or
    /// an id that names nothing in the current state, is refused and changes nothing.
    public static func sync<Value>(
        _ name: String,
        _ argument: Argument<Value>,
        _ body: @escaping @Sendable (inout Subject, Value) -> Void
    ) -> Action {
        Action(name: name, parameters: [argument.parameter]) { subject, arguments throws(StateError) in
            body(&subject, try argument.resolve(subject, arguments))
            return nil
        }
    }

    /// An action's one typed argument: its parameter, and how its JSON becomes the value the
    /// action receives.
    public struct Argument<Value>: Sendable {
        let parameter: Parameter
        let resolve: @Sendable (Subject, Arguments) throws(StateError) -> Value

        /// The argument `name`, decoded with `codec`. Several values travel as one argument whose
        /// codec is a `Codable` value's (`Screen.value(…).codec`).
        public static func value(_ name: String, _ codec: StateCodec<Value>) -> Argument {
            Argument(parameter: Parameter(name, codec)) { _, arguments throws(StateError) in
                try arguments.decode(name, codec)
            }
        }

        /// The element of `elements` whose `id` the string argument `name` gives: a network
        /// tapped in a list. An id that names none is refused with the argument's path.
        public static func element(
            _ name: String,
            in elements: KeyPath<Subject, [Value]> & Sendable,
            id: KeyPath<Value, String> & Sendable
        ) -> Argument {
            Argument(parameter: Parameter(name, .string)) { subject, arguments throws(StateError) in
                let wanted = try arguments.string(name)
                guard let element = subject[keyPath: elements].first(where: { $0[keyPath: id] == wanted }) else {
                    throw StateError(arguments.path(name), "no \(name) with id \"\(wanted)\" was found")
                }
                return element
            }
        }
    }

    /// Validates the arguments against the declared parameters, then runs the action.
    func perform(on subject: inout Subject, arguments json: JSON?) throws(StateError) -> Effect? {
        let root = JSONPath("args")
        let object: JSONObject
        switch json {
        case nil, .null?: object = JSONObject()
        case .object(let value)?: object = value
        case let other?: throw StateError(root, "expected an object, found \(other.typeName)")
        }
        for key in object.keys where !parameters.contains(where: { $0.name == key }) {
            throw StateError(root.appending(key), "unknown argument for \(name)")
        }
        for parameter in parameters {
            guard let value = object[parameter.name] else {
                throw StateError(root.appending(parameter.name), "missing argument of type \(parameter.typeName)")
            }
            try parameter.validate(value, root.appending(parameter.name))
        }
        return try run(&subject, Arguments(object: object, root: root))
    }
}

extension Action where Subject: AnyObject {
    /// An action that starts asynchronous work (a fetch, a delay). Its synchronous part runs in the
    /// action's own transaction; what it changes later is reconciled as it happens, and the session
    /// knows when it has finished.
    ///
    /// The work is cancelled only when the session ends, is suspended (a shutdown, another node
    /// taking it over) or rolls back a failed write, never because its model was dismissed or
    /// popped: a model whose work must not outlive its screen checks, when the work resumes,
    /// whether it is still where it was (navd's wifi join does nothing once its sheet is gone).
    /// Cancellation is Swift's, cooperative: work that goes on after it (a `try? await
    /// Task.sleep` that swallows it) still changes its model, and while the session is still
    /// hosted that change is reconciled and kept like any other. Work that must stop checks
    /// `Task.isCancelled`, or lets the `CancellationError` end it.
    public static func task(_ name: String, _ body: @escaping @Sendable (Subject) async -> Void) -> Action {
        Action(name: name, parameters: []) { subject, _ throws(StateError) in
            let model = subject
            return Effect { await body(model) }
        }
    }

    /// Asynchronous work with one typed argument, resolved before the work starts: a wrong
    /// type, or an id that names nothing, is refused and starts nothing.
    public static func task<Value>(
        _ name: String,
        _ argument: Argument<Value>,
        _ body: @escaping @Sendable (Subject, Value) async -> Void
    ) -> Action {
        Action(name: name, parameters: [argument.parameter]) { subject, arguments throws(StateError) in
            let model = subject
            let value = try argument.resolve(subject, arguments)
            return Effect { await body(model, value) }
        }
    }
}

/// The arguments of an action, already checked against its parameters.
struct Arguments: Sendable {
    let object: JSONObject
    let root: JSONPath

    /// The argument `name`, decoded with `codec`.
    func decode<Value>(_ name: String, _ codec: StateCodec<Value>) throws(StateError) -> Value {
        try codec.decode(object[name] ?? .null, path(name), nil)
    }

    /// The string argument `name`.
    func string(_ name: String) throws(StateError) -> String { try decode(name, .string) }

    /// The path of an argument, for rejecting a value that does not fit the current state.
    func path(_ name: String) -> JSONPath { root.appending(name) }
}

/// Asynchronous work an action started, run on its session's executor.
public struct Effect {
    let operation: () async -> Void

    /// Work to run on the session's executor once the action's transaction is over.
    public init(_ operation: @escaping () async -> Void) {
        self.operation = operation
    }
}
