import Foundation

/// A feature's field value as navd sends it. State is each feature's own shape, so the client
/// keeps it as plain JSON; the tree around it (ids, slots, styles, alerts) is typed.
public enum JSONValue: Sendable, Hashable, Codable {
    /// `null`, or an absent optional.
    case null
    /// `true` or `false`.
    case bool(Bool)
    /// Any JSON number but those below.
    case number(Double)
    /// A whole number past ±2⁵³, which a `Double` would round (navd's integers are 64-bit): kept
    /// exact, so a client that shows it or sends it back shows and sends what the server holds.
    case integer(Int64)
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
        else if let value = try? container.decode(Int64.self), value.magnitude > Self.exactInDouble { self = .integer(value) }
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
        case .integer(let value): try container.encode(value)
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
    public var intValue: Int? {
        switch self {
        case .number(let value): Int(exactly: value)
        case .integer(let value): Int(exactly: value)
        default: nil
        }
    }

    /// The largest magnitude up to which every whole number is exact as a `Double`.
    private static let exactInDouble: UInt64 = 1 << 53
    /// The Boolean, if it is one.
    public var boolValue: Bool? { if case .bool(let value) = self { value } else { nil } }
}
