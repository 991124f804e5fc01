/// An array in a feature's state shown as a navigation stack: one screen per element, pushed
/// and popped as the array grows and shrinks.
public struct StackSlot<Owner>: Sendable {
    public let name: String
    /// The cases of path value this stack accepts from a push, as `GET /features` lists them.
    public let accepts: [String]
    let contents: @Sendable (Owner) -> StackContents
    let truncate: @Sendable (inout Owner, Int) -> Void
    /// Appends `value` if it is of a kind this stack holds; `false` if it is not.
    let push: @Sendable (inout Owner, JSON, JSONPath) throws(StateError) -> Bool

    /// A path of elements that each hold a model, as `[Path]` with `Path.counter(CounterModel)`.
    public static func path<Element>(
        _ name: String,
        _ keyPath: WritableKeyPath<Owner, [Element]> & Sendable,
        accepts cases: [String],
        codec: StateCodec<Element>,
        identity: @escaping @Sendable (Element) -> ObjectIdentifier,
        feature: @escaping @Sendable (Element) -> StackElement
    ) -> StackSlot {
        StackSlot(
            name: name,
            accepts: cases,
            contents: { owner in
                let elements = owner[keyPath: keyPath]
                return StackContents(
                    count: elements.count,
                    identity: { .object(identity(elements[$0])) },
                    makeFeature: { feature(elements[$0]).makeFeature() }
                )
            },
            truncate: { owner, count in
                let excess = owner[keyPath: keyPath].count - count
                if excess > 0 { owner[keyPath: keyPath].removeLast(excess) }
            },
            push: { owner, value, path throws(StateError) in
                guard case .object(let object) = value, object.count == 1,
                      let key = object.keys.first, cases.contains(key) else { return false }
                owner[keyPath: keyPath].append(try codec.decode(value, path, nil))
                return true
            }
        )
    }
}

/// A stack's elements right now, read lazily so that a long path costs little to compare.
struct StackContents {
    let count: Int
    let identity: (Int) -> Identity
    let makeFeature: (Int) -> any AnyLiveFeature
}

/// The screen an element of a path shows.
public struct StackElement {
    let makeFeature: () -> any AnyLiveFeature

    public init<Model: AnyObject>(_ model: Model, _ screen: Screen<Model>) {
        makeFeature = { LiveFeature(screen, access: .model(model)) }
    }
}
