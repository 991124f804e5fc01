import Foundation

/// A feature's field value as navd sends it. State is each feature's own shape, so the client
/// keeps it as plain JSON; the tree around it (ids, slots, styles, alerts) is typed.
public enum JSONValue: Sendable, Hashable, Codable {
    /// `null`, or an absent optional.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// Any JSON number.
    case number(Double)
    /// A string.
    case string(String)
    /// An array.
    case array([JSONValue])
    /// An object; an enum value is one with a single key, the case.
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Double.self) { self = .number(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([JSONValue].self) { self = .array(value) }
        else { self = .object(try container.decode([String: JSONValue].self)) }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The value at `key` of an object; nil otherwise.
    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { object[key] } else { nil }
    }

    /// The string, if it is one.
    public var stringValue: String? { if case .string(let value) = self { value } else { nil } }
    /// The number, if it is a whole one.
    public var intValue: Int? { if case .number(let value) = self, let int = Int(exactly: value) { int } else { nil } }
    /// The Boolean, if it is one.
    public var boolValue: Bool? { if case .bool(let value) = self { value } else { nil } }
}
