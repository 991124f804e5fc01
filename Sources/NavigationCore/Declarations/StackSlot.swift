#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An array in a feature's state shown as a navigation stack: one screen per element, pushed
/// and popped as the array grows and shrinks.
public struct StackSlot<Owner>: Sendable {
    /// Its slot name, as nodes' stacks and `GET /features` show it (`path`).
    public let name: String
    /// The cases of path value this stack accepts from a push, as `GET /features` lists them.
    public let accepts: [String]
    /// The screens its elements can show, so the catalog can be derived by walking the declarations.
    public let screens: [any DescribableScreen]
    /// The state field holding the path, declared with it.
    let field: Field<Owner>
    let contents: @Sendable (Owner) -> StackContents
    let truncate: @Sendable (inout Owner, Int) -> Void
    /// Appends `value` if it is of a kind this stack holds; `false` if it is not.
    let push: @Sendable (inout Owner, JSON, JSONPath) throws(StateError) -> Bool

    /// A path of an enum's cases that each hold a model, as `[Path]` with
    /// `Path.counter(CounterModel)`, declared once: each case names its screen and how to get in
    /// and out of the enum, and the state field (`name`, an array of `typeName`), the cases a push
    /// accepts and the screens the catalog lists are all made from that one list, so they can
    /// never disagree.
    ///
    /// Every case of the enum that the feature's code can put on the path must be declared: an
    /// element of no declared case has no screen to show, and stops the process.
    ///
    /// - Parameter edit: gives in-place access to the path (`{ model, body in body(&model.path) }`).
    ///   Writing through a key path would copy an observable array on every push.
    public static func path<Element>(
        _ name: String,
        _ keyPath: WritableKeyPath<Owner, [Element]> & Sendable,
        edit: @escaping @Sendable (inout Owner, (inout [Element]) -> Void) -> Void,
        typeName: String = "Path",
        _ cases: [PathCase<Element>]
    ) -> StackSlot {
        path(name, keyPath, edit: edit, accepts: cases.map(\.enumCase.name), screens: cases.map(\.screen),
             codec: .oneOf(typeName, cases.map(\.enumCase)), feature: { element in
                 for pathCase in cases { if let shown = pathCase.element(element) { return shown } }
                 preconditionFailure("an element of path \"\(name)\" is a \(typeName) of none of the cases it declares")
             })
    }

    /// A path of elements that each hold a model, coded by `codec`: a path of one model type, or
    /// an enum whose screens are chosen by hand (`feature`). The path is also the state field
    /// `name`, coded as an array of `codec`. Prefer the declaration by ``PathCase``s for an enum.
    ///
    /// - Parameters:
    ///   - edit: gives in-place access to the path (`{ model, body in body(&model.path) }`).
    ///     Writing through a key path would copy an observable array on every push.
    ///   - cases: the cases a push may name; each must be a case of `codec`, checked here.
    public static func path<Element>(
        _ name: String,
        _ keyPath: WritableKeyPath<Owner, [Element]> & Sendable,
        edit: @escaping @Sendable (inout Owner, (inout [Element]) -> Void) -> Void,
        accepts cases: [String],
        screens: [any DescribableScreen],
        codec: StateCodec<Element>,
        feature: @escaping @Sendable (Element) -> StackElement
    ) -> StackSlot {
        // A name that is no case of the codec would be advertised by `GET /features` and then
        // refused by every push: a mistake in the declaration, found as the screens are built.
        let codecCases: [String]
        if case .oneOf(_, let known) = codec.schema { codecCases = known.map(\.name) } else { codecCases = [] }
        for accepted in cases where !codecCases.contains(accepted) {
            preconditionFailure("path \"\(name)\" accepts \"\(accepted)\", which is not a case of its codec (\(codecCases.joined(separator: ", ")))")
        }
        return StackSlot(
            name: name,
            accepts: cases,
            screens: screens,
            field: .children(name, keyPath, .array(codec)),
            contents: { owner in
                let elements = owner[keyPath: keyPath]
                return StackContents(
                    count: elements.count,
                    fingerprint: { ElementFingerprint(elements) },
                    makeFeature: { feature(elements[$0]).makeFeature() }
                )
            },
            truncate: { owner, count in
                edit(&owner) { elements in
                    if elements.count > count { elements.removeLast(elements.count - count) }
                }
            },
            push: { owner, value, path throws(StateError) in
                // A value naming a case of this stack is this stack's to refuse, with the reason
                // a deep link gets (two cases at once, a field of the wrong type).
                guard case .object(let object) = value, object.keys.contains(where: cases.contains) else { return false }
                let element = try codec.decode(value, path, nil)
                edit(&owner) { $0.append(element) }
                return true
            }
        )
    }
}

/// A stack's elements right now, read lazily so that a long path costs little to compare.
struct StackContents {
    let count: Int
    let fingerprint: () -> ElementFingerprint
    let makeFeature: (Int) -> any AnyLiveFeature
}

/// The raw bits of a path's elements, kept to find the longest common prefix (rule 6) without
/// touching the elements themselves.
///
/// Elements hold models, so equal bits mean the same case holding the same object: the same
/// element. Unequal bits are treated as a new element, which at worst pops and pushes one that
/// could have stayed; never the reverse. Comparing bits costs no reference counting, which is
/// what makes a push onto a 10,000-element path cost about the same as onto a short one.
struct ElementFingerprint {
    private var bytes: [UInt8] = []
    private var stride = 1

    init() {}

    init<Element>(_ elements: [Element]) {
        stride = MemoryLayout<Element>.stride
        bytes = elements.withUnsafeBytes { Array($0) }
    }

    func commonPrefix(with other: ElementFingerprint) -> Int {
        guard stride == other.stride else { return 0 }
        let count = min(bytes.count, other.bytes.count) / stride
        return bytes.withUnsafeBytes { mine in
            other.bytes.withUnsafeBytes { theirs in
                guard let a = mine.baseAddress, let b = theirs.baseAddress else { return 0 }
                if memcmp(a, b, count * stride) == 0 { return count }
                var index = 0
                while index < count, memcmp(a + index * stride, b + index * stride, stride) == 0 { index += 1 }
                return index
            }
        }
    }
}

/// One case of a path's element enum: its name, the screen that shows its model, and how to
/// get in and out of the enum.
public struct PathCase<Element>: Sendable {
    let enumCase: EnumCase<Element>
    let screen: any DescribableScreen
    let element: @Sendable (Element) -> StackElement?

    /// A case holding a child model, shown by `screen`.
    ///
    /// - Parameters:
    ///   - embed: the case constructor, as `Path.counter`.
    ///   - extract: the model when the element is this case.
    public static func model<Child: AnyObject>(
        _ name: String,
        _ screen: Screen<Child>,
        embed: @escaping @Sendable (Child) -> Element,
        extract: @escaping @Sendable (Element) -> Child?
    ) -> PathCase {
        PathCase(enumCase: EnumCase(name, screen.codec, embed: embed, extract: extract), screen: screen,
                 element: { extract($0).map { StackElement($0, screen) } })
    }
}

/// The screen an element of a path shows.
public struct StackElement {
    let makeFeature: () -> any AnyLiveFeature

    /// An element holding `model`, shown by `screen`.
    public init<Model: AnyObject>(_ model: Model, _ screen: Screen<Model>) {
        makeFeature = { LiveFeature(screen, access: .model(model)) }
    }
}
