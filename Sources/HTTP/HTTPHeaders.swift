/// Header fields in the order they were sent or added. Names compare without regard to
/// ASCII case; values are kept as given.
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral, CustomStringConvertible {
    public typealias Element = (name: String, value: String)

    private var fields: [Element]

    public init() {
        fields = []
    }

    public init(_ pairs: [(String, String)]) {
        fields = pairs.map { (name: $0.0, value: $0.1) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    /// The first value of the field, if present.
    public subscript(name: String) -> String? {
        for field in fields where ASCII.namesEqual(field.name, name) {
            return field.value
        }
        return nil
    }

    /// Every value of the field, in order.
    public func values(_ name: String) -> [String] {
        fields.compactMap { ASCII.namesEqual($0.name, name) ? $0.value : nil }
    }

    public func contains(_ name: String) -> Bool {
        fields.contains { ASCII.namesEqual($0.name, name) }
    }

    /// Appends a field, keeping any existing ones of the same name.
    public mutating func add(_ name: String, _ value: String) {
        fields.append((name: name, value: value))
    }

    /// Replaces every field of that name by one (at the place of the first).
    public mutating func set(_ name: String, _ value: String) {
        guard let first = fields.firstIndex(where: { ASCII.namesEqual($0.name, name) }) else {
            fields.append((name: name, value: value))
            return
        }
        fields[first] = (name: name, value: value)
        var index = fields.count - 1
        while index > first {
            if ASCII.namesEqual(fields[index].name, name) { fields.remove(at: index) }
            index -= 1
        }
    }

    /// Removes every field of that name.
    public mutating func remove(_ name: String) {
        fields.removeAll { ASCII.namesEqual($0.name, name) }
    }

    public var count: Int { fields.count }
    public var isEmpty: Bool { fields.isEmpty }

    public func makeIterator() -> IndexingIterator<[Element]> {
        fields.makeIterator()
    }

    public var description: String {
        fields.map { "\($0.name): \($0.value)" }.joined(separator: "\n")
    }

    mutating func reserveCapacity(_ capacity: Int) {
        fields.reserveCapacity(capacity)
    }
}
