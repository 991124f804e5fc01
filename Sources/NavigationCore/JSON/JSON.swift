/// A JSON value as the wire carries it.
///
/// Objects keep their keys in insertion order so that what the server writes reads in the
/// order features declare their fields; equality ignores that order, as JSON does.
public enum JSON: Sendable {
    /// `null`.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// A number written without fraction or exponent that fits an `Int`.
    case int(Int)
    /// Any other number.
    case double(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSON])
    /// An object, its keys in order.
    case object(JSONObject)
}

extension JSON: Equatable {
    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case let (.bool(a), .bool(b)): return a == b
        case let (.int(a), .int(b)): return a == b
        case let (.double(a), .double(b)): return a == b
        case let (.int(a), .double(b)), let (.double(b), .int(a)): return Double(a) == b
        case let (.string(a), .string(b)): return a == b
        case let (.array(a), .array(b)): return a == b
        case let (.object(a), .object(b)): return a == b
        default: return false
        }
    }
}

extension JSON {
    /// The name of this value's JSON type, for error messages.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .int, .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    /// The value at `key` of an object; nil otherwise.
    public subscript(key: String) -> JSON? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    /// The element at `index` of an array; nil otherwise.
    public subscript(index: Int) -> JSON? {
        if case .array(let array) = self, array.indices.contains(index) { return array[index] }
        return nil
    }

    /// The object, if it is one.
    public var objectValue: JSONObject? {
        if case .object(let object) = self { return object }
        return nil
    }

    /// The array, if it is one.
    public var arrayValue: [JSON]? {
        if case .array(let array) = self { return array }
        return nil
    }

    /// The string, if it is one.
    public var stringValue: String? {
        if case .string(let string) = self { return string }
        return nil
    }

    /// The number, if it is a whole one.
    public var intValue: Int? {
        switch self {
        case .int(let value): return value
        case .double(let value) where value.rounded() == value && abs(value) < 9.0e15: return Int(value)
        default: return nil
        }
    }
}

extension JSON: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByBooleanLiteral,
    ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral, ExpressibleByFloatLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSON)...) { self = .object(JSONObject(elements)) }
    public init(nilLiteral: ()) { self = .null }
}

/// A JSON object: ordered key/value pairs with map-like lookup.
///
/// Feature states are small, so a linear scan beats hashing here and keeps the order.
public struct JSONObject: Sendable, Equatable {
    /// The key/value pairs, in insertion order.
    public private(set) var pairs: [(key: String, value: JSON)]

    /// An empty object.
    public init() { pairs = [] }

    /// An object of `pairs`; a repeated key keeps its first place and its last value.
    public init(_ pairs: [(String, JSON)]) {
        self.pairs = []
        self.pairs.reserveCapacity(pairs.count)
        for (key, value) in pairs { self[key] = value }
    }

    /// The number of keys.
    public var count: Int { pairs.count }
    /// Whether it has no keys.
    public var isEmpty: Bool { pairs.isEmpty }
    /// The keys, in order.
    public var keys: [String] { pairs.map(\.key) }

    /// The value at `key`; setting `nil` removes the key, a new key goes at the end.
    public subscript(key: String) -> JSON? {
        get {
            for pair in pairs where pair.key == key { return pair.value }
            return nil
        }
        set {
            if let index = pairs.firstIndex(where: { $0.key == key }) {
                if let newValue { pairs[index].value = newValue } else { pairs.remove(at: index) }
            } else if let newValue {
                pairs.append((key, newValue))
            }
        }
    }

    /// Room for `count` keys in one allocation.
    public mutating func reserveCapacity(_ count: Int) {
        pairs.reserveCapacity(count)
    }

    /// Appends without checking for an existing key; for building objects whose keys are known distinct.
    public mutating func append(_ key: String, _ value: JSON) {
        pairs.append((key, value))
    }

    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.pairs.count == rhs.pairs.count else { return false }
        for (index, pair) in lhs.pairs.enumerated() {
            // Same order is the common case; fall back to lookup otherwise.
            if index < rhs.pairs.count, rhs.pairs[index].key == pair.key {
                if rhs.pairs[index].value != pair.value { return false }
            } else if rhs[pair.key] != pair.value {
                return false
            }
        }
        return true
    }
}
