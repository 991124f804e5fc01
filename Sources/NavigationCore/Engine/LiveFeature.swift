/// How a live feature reaches its subject: a model directly, a value through its owner's state.
struct Access<Subject> {
    let read: () -> Subject?
    let write: (Subject) -> Void
    /// The model, when the feature shows one object for as long as it lives.
    var model: AnyObject?

    init(read: @escaping () -> Subject?, write: @escaping (Subject) -> Void) {
        self.read = read
        self.write = write
    }

    static func model(_ model: Subject) -> Access where Subject: AnyObject {
        var access = Access(read: { model }, write: { _ in })
        access.model = model
        return access
    }

    /// Reads, changes and writes back. `nil` if the subject is no longer there.
    func modify<Result, Failure: Error>(_ body: (inout Subject) throws(Failure) -> Result) throws(Failure) -> Result? {
        guard var subject = read() else { return nil }
        let result = try body(&subject)
        write(subject)
        return result
    }
}

/// What one feature instance on screen looks like now.
struct Derivation {
    var state: JSONObject
    var presentations: [(slot: Int, child: PresentedChild)]
    var stacks: [StackContents]
}

/// A feature instance on screen, with its type erased so the reconciler can hold any feature.
protocol AnyLiveFeature: AnyObject {
    var screenName: String { get }
    /// What its encoded state is kept under between encodings; nil for a value, whose state
    /// is its owner's (`EncodedStates`).
    var encodedStateKey: EncodedStates.Key? { get }
    func derive() -> Derivation?
    func encodeState() -> JSON?
    func perform(_ action: String, arguments: JSON?) throws(NavigationError) -> Effect?
    func settle() -> Effect?
    func bind(_ field: String, to value: JSON) throws(NavigationError)
    func dismiss(slot: Int)
    func truncate(stack: Int, keeping count: Int)
    func push(onto stack: Int, _ value: JSON) throws(StateError) -> Bool
    func validateState(_ json: JSON) throws(StateError)
    func replaceState(with json: JSON) throws(StateError)
    func stackName(_ index: Int) -> String
    func presentationSlot(_ index: Int) -> (name: String, style: PresentationStyle, anchor: String?)
}

final class LiveFeature<Subject>: AnyLiveFeature {
    let screen: Screen<Subject>
    let access: Access<Subject>

    init(_ screen: Screen<Subject>, access: Access<Subject>) {
        self.screen = screen
        self.access = access
    }

    var screenName: String { screen.name }

    var encodedStateKey: EncodedStates.Key? {
        access.model.map { EncodedStates.Key(model: $0, screen: screen) }
    }

    func derive() -> Derivation? {
        guard let subject = access.read() else { return nil }
        let body = screen.body
        // By index: a declaration read in place, not copied (with every closure it holds
        // retained) for each field and slot, on every derivation.
        var state = JSONObject()
        // Exactly: a node keeps its state for as long as it is on screen.
        state.reserveCapacity(screen.ownFieldCount)
        for index in body.fields.indices where !body.fields[index].holdsChildren {
            state.append(body.fields[index].name, body.fields[index].encode(subject))
        }
        var presentations: [(slot: Int, child: PresentedChild)] = []
        for index in body.presentations.indices {
            if let child = body.presentations[index].current(subject, access) { presentations.append((index, child)) }
        }
        return Derivation(state: state, presentations: presentations, stacks: body.stacks.map { $0.contents(subject) })
    }

    func encodeState() -> JSON? {
        access.read().map(screen.encode)
    }

    func settle() -> Effect? {
        guard let settle = screen.body.settle else { return nil }
        return access.modify { subject in settle.run(&subject) } ?? nil
    }

    func perform(_ name: String, arguments: JSON?) throws(NavigationError) -> Effect? {
        guard let action = screen.body.actions.first(where: { $0.name == name }) else {
            throw .unknownAction(feature: screen.name, action: name)
        }
        do {
            return try access.modify { subject throws(StateError) in try action.perform(on: &subject, arguments: arguments) } ?? nil
        } catch {
            throw .invalidArgument(error)
        }
    }

    func bind(_ name: String, to value: JSON) throws(NavigationError) {
        guard let field = screen.body.fields.first(where: { $0.name == name }) else {
            throw .unknownBinding(feature: screen.name, name: name)
        }
        guard field.isBindable else { throw .readOnlyBinding(feature: screen.name, name: name) }
        do {
            try access.modify { subject throws(StateError) in try field.assign(&subject, value, JSONPath("value")) }
        } catch {
            throw .invalidArgument(error)
        }
    }

    func dismiss(slot: Int) {
        access.modify { screen.body.presentations[slot].dismiss(&$0) }
    }

    func truncate(stack: Int, keeping count: Int) {
        access.modify { screen.body.stacks[stack].truncate(&$0, count) }
    }

    func push(onto stack: Int, _ value: JSON) throws(StateError) -> Bool {
        try access.modify { subject throws(StateError) in try screen.body.stacks[stack].push(&subject, value, JSONPath("value")) } ?? false
    }

    func validateState(_ json: JSON) throws(StateError) {
        _ = try screen.decode(json, at: JSONPath("state"), into: nil)
    }

    func replaceState(with json: JSON) throws(StateError) {
        try access.modify { subject throws(StateError) in subject = try screen.decode(json, at: JSONPath("state"), into: subject) }
    }

    func stackName(_ index: Int) -> String {
        screen.body.stacks[index].name
    }

    func presentationSlot(_ index: Int) -> (name: String, style: PresentationStyle, anchor: String?) {
        let slot = screen.body.presentations[index]
        return (slot.name, slot.style, slot.anchor)
    }
}
