/// Declares how a feature is shown: its fields on the wire, the actions its controls send, and
/// the style of each navigation slot. It is the server's view controller; the model stays plain.
///
/// A screen is built once, when the catalog is assembled, and never changes afterwards. It is a
/// class so that a feature can present itself recursively (a child of the same kind).
public final class Screen<Subject>: Sendable {
    /// The feature's name on the wire: `GET /features`, nodes' `feature`, `POST /sessions`.
    public let name: String
    /// A feature in its default state.
    public let make: @Sendable () -> Subject
    // Written once, at the end of `init`, before the screen can be shared.
    /// Its declarations.
    nonisolated(unsafe) public private(set) var body: ScreenBody<Subject>
    /// Its fields that are its own state rather than its children: the room a node's state
    /// takes, reserved exactly on every derivation.
    nonisolated(unsafe) private(set) var ownFieldCount = 0
    /// The subject is a class, held as one plain reference: its encodings can be kept by object.
    private let subjectIsObject = Subject.self is AnyClass && MemoryLayout<Subject>.size == MemoryLayout<AnyObject>.size
    /// What it encodes is what its node observes, and its children's screens' encodings: its
    /// fields are coded one by one, and those that hold children only by the library's own
    /// codecs (`StateCodec.isStructural`).
    nonisolated(unsafe) private(set) var encodingCanBeKept = false
    /// Its fields that hold children use only the library's own codecs. Checked for a value's
    /// screen too: its state is its owner's, so a codec of its written by hand makes the
    /// owner's encoding one that cannot be kept.
    nonisolated(unsafe) private(set) var childrenAreStructural = false

    /// A screen from its declarations, written in a ``ScreenBuilder`` block in the order the
    /// state encodes its fields.
    ///
    /// - Parameters:
    ///   - make: a feature in its default state; a partial deep link starts from it.
    ///   - body: its fields, actions, presentation and stack slots, and at most one ``Settle``.
    public convenience init(
        _ name: String,
        make: @escaping @Sendable () -> Subject,
        @ScreenBuilder<Subject> body: () -> ScreenBody<Subject>
    ) {
        let declarations = body()
        self.init(name, make: make) { _ in declarations }
    }

    /// A screen with no state or actions of its own: an alert, a dialog, a placeholder page.
    public convenience init(_ name: String, make: @escaping @Sendable () -> Subject) {
        self.init(name, make: make) { _ in ScreenBody() }
    }

    /// A screen that presents its own kind: `body` receives the screen being declared.
    public static func recursive(
        _ name: String,
        make: @escaping @Sendable () -> Subject,
        @ScreenBuilder<Subject> body: (Screen<Subject>) -> ScreenBody<Subject>
    ) -> Screen<Subject> {
        Screen(name, make: make, body: body)
    }

    init(
        _ name: String,
        make: @escaping @Sendable () -> Subject,
        body: (Screen<Subject>) -> ScreenBody<Subject>
    ) {
        self.name = name
        self.make = make
        self.body = ScreenBody()
        self.body = body(self)
        ownFieldCount = self.body.fields.count { !$0.holdsChildren }
        childrenAreStructural = self.body.fields.allSatisfy { !$0.holdsChildren || $0.isStructural }
        encodingCanBeKept = self.body.wholeValue == nil && childrenAreStructural
        if let repeated = self.body.repeatedName {
            // A declaration, not input: two fields of one name would make a state with the key twice.
            preconditionFailure("screen \(name): \(repeated) is declared twice")
        }
    }

    /// The feature's full state, children included; missing fields take their defaults.
    public var codec: StateCodec<Subject> {
        StateCodec(schema: .feature(self), encode: { [self] subject in encode(subject) }) { [self] json, path, existing throws(StateError) in
            try decode(json, at: path, into: existing)
        }.structural(true)
    }

    func encode(_ subject: Subject) -> JSON {
        guard subjectIsObject, let kept = EncodedStates.current else {
            if !childrenAreStructural { EncodedStates.current?.noteUnobserved() }
            return encodeAfresh(subject)
        }
        // The subject is one reference (checked at init): read as an object without the dynamic
        // cast `as AnyObject` would make on every element of a long path.
        let key = EncodedStates.Key(model: unsafeBitCast(subject, to: AnyObject.self), screen: self)
        return kept.encoding(key, canBeKept: encodingCanBeKept) { encodeAfresh(subject) }
    }

    private func encodeAfresh(_ subject: Subject) -> JSON {
        if let whole = body.wholeValue { return whole.encode(subject) }
        var object = JSONObject()
        for field in body.fields { object.append(field.name, field.encode(subject)) }
        return .object(object)
    }

    /// With `existing`, fields the JSON leaves out are reset to their defaults (a deep link replaces
    /// state), and child models already in place are updated rather than replaced.
    func decode(_ json: JSON, at path: JSONPath, into existing: Subject?) throws(StateError) -> Subject {
        guard case .object(let object) = json else {
            throw .typeMismatch(path, expected: "an object (\(name) state)", found: json)
        }
        for key in object.keys where !body.fields.contains(where: { $0.name == key }) {
            throw StateError(path.appending(key), "unknown field of \(name)")
        }
        if let whole = body.wholeValue { return try whole.decode(object, path) }
        var subject = existing ?? make()
        let defaults = existing == nil ? nil : make()
        for field in body.fields {
            if let value = object[field.name] {
                try field.assign(&subject, value, path.appending(field.name))
            } else if let defaults {
                field.reset(&subject, defaults)
            }
        }
        return subject
    }
}

/// The declarations a screen is made of, gathered by ``ScreenBuilder``.
public struct ScreenBody<Subject>: Sendable {
    /// The state's fields, in the order the state encodes them.
    public internal(set) var fields: [Field<Subject>] = []
    /// What its controls send.
    public internal(set) var actions: [Action<Subject>] = []
    /// Where it presents children, and how.
    public internal(set) var presentations: [PresentationSlot<Subject>] = []
    /// Its navigation stacks.
    public internal(set) var stacks: [StackSlot<Subject>] = []
    /// What a session restored after a restart does about the effects that were running.
    var settle: Settle<Subject>?
    /// Codes the whole value at once where field by field would repeat the work (`Screen.value`).
    var wholeValue: WholeValueCoding<Subject>?

    init() {}

    /// A field, action or slot name used twice, which the wire could not tell apart.
    var repeatedName: String? {
        func repeated(_ names: [String]) -> String? {
            var seen = Set<String>()
            return names.first { !seen.insert($0).inserted }
        }
        if let field = repeated(fields.map(\.name)) { return "the state field \"\(field)\"" }
        if let action = repeated(actions.map(\.name)) { return "the action \"\(action)\"" }
        if let slot = repeated(presentations.map(\.name) + stacks.map(\.name)) { return "the slot \"\(slot)\"" }
        return nil
    }

    /// Appends `other`'s declarations after these.
    mutating func append(_ other: ScreenBody) {
        fields += other.fields
        actions += other.actions
        presentations += other.presentations
        stacks += other.stacks
        if let settle = other.settle {
            precondition(self.settle == nil, "a screen settles in one place: declare one Settle")
            self.settle = settle
        }
    }
}

/// A value's state coded in one pass: the object it encodes to, and the value an object (whose
/// keys are known to be fields) decodes to, missing fields taking their defaults.
struct WholeValueCoding<Subject>: Sendable {
    let encode: @Sendable (Subject) -> JSON
    let decode: @Sendable (JSONObject, JSONPath) throws(StateError) -> Subject
}
