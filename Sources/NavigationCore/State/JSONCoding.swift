/// `Codable` straight to and from `JSON`, so a plain value type (a network, a fact) travels as
/// state without a hand-written field list. navd imports no Foundation, hence no `JSONDecoder`.
///
/// Decoding keeps the state codecs' rules: a wrong type, a missing key or a key the type does not
/// declare is a `StateError` naming the JSON path, so the client is told which value to fix.
enum JSONCoding {
    static func encode<Value: Encodable>(_ value: Value) -> JSON {
        let slot = JSONSlot()
        // The encoder itself never throws; a type's own `encode(to:)` that does leaves `null`.
        do { try value.encode(to: SlotEncoder(slot: slot)) } catch { return .null }
        return slot.json
    }

    static func decode<Value: Decodable>(_ type: Value.Type, _ json: JSON, at path: JSONPath) throws(StateError) -> Value {
        do {
            return try Value(from: ValueDecoder(json: json, path: path))
        } catch let error as StateError {
            throw error
        } catch {
            // A type's own `init(from:)` rejected the value.
            throw StateError(path, "\(error)")
        }
    }
}

// MARK: - Encoding

/// A value under construction; containers write into child slots that are read out at the end.
private final class JSONSlot {
    enum Content { case value(JSON), object([(String, JSONSlot)]), array([JSONSlot]) }
    var content = Content.value(.null)

    var json: JSON {
        switch content {
        case .value(let json): json
        case .object(let pairs): .object(JSONObject(pairs.map { ($0.0, $0.1.json) }))
        case .array(let items): .array(items.map(\.json))
        }
    }

    func child(_ key: String) -> JSONSlot {
        var pairs: [(String, JSONSlot)] = []
        if case .object(let existing) = content { pairs = existing }
        if let found = pairs.first(where: { $0.0 == key }) { return found.1 }
        let slot = JSONSlot()
        pairs.append((key, slot))
        content = .object(pairs)
        return slot
    }

    func appended() -> JSONSlot {
        var items: [JSONSlot] = []
        if case .array(let existing) = content { items = existing }
        let slot = JSONSlot()
        items.append(slot)
        content = .array(items)
        return slot
    }
}

private struct SlotEncoder: Encoder {
    let slot: JSONSlot
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if case .object = slot.content {} else { slot.content = .object([]) }
        return KeyedEncodingContainer(KeyedSlotEncoder(slot: slot, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        if case .array = slot.content {} else { slot.content = .array([]) }
        return UnkeyedSlotEncoder(slot: slot, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { SingleSlotEncoder(slot: slot, codingPath: codingPath) }
}

private struct KeyedSlotEncoder<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let slot: JSONSlot
    var codingPath: [any CodingKey]

    mutating func encodeNil(forKey key: Key) throws { slot.child(key.stringValue).content = .value(.null) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        try value.encode(to: SlotEncoder(slot: slot.child(key.stringValue), codingPath: codingPath + [key]))
    }
    // An absent optional is written as `null`, not left out: the key stays a field clients see and may set.
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { try encodeOrNull(value, key) }
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws { try encodeOrNull(value, key) }
    private mutating func encodeOrNull<T: Encodable>(_ value: T?, _ key: Key) throws {
        if let value { try encode(value, forKey: key) } else { try encodeNil(forKey: key) }
    }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
        SlotEncoder(slot: slot.child(key.stringValue), codingPath: codingPath + [key]).container(keyedBy: keyType)
    }
    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        SlotEncoder(slot: slot.child(key.stringValue), codingPath: codingPath + [key]).unkeyedContainer()
    }
    mutating func superEncoder() -> any Encoder { SlotEncoder(slot: slot.child("super"), codingPath: codingPath) }
    mutating func superEncoder(forKey key: Key) -> any Encoder { SlotEncoder(slot: slot.child(key.stringValue), codingPath: codingPath + [key]) }
}

private struct UnkeyedSlotEncoder: UnkeyedEncodingContainer {
    let slot: JSONSlot
    var codingPath: [any CodingKey]
    var count: Int {
        if case .array(let items) = slot.content { return items.count }
        return 0
    }

    mutating func encodeNil() throws { slot.appended().content = .value(.null) }
    mutating func encode<T: Encodable>(_ value: T) throws { try value.encode(to: SlotEncoder(slot: slot.appended(), codingPath: codingPath)) }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        SlotEncoder(slot: slot.appended(), codingPath: codingPath).container(keyedBy: keyType)
    }
    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
        SlotEncoder(slot: slot.appended(), codingPath: codingPath).unkeyedContainer()
    }
    mutating func superEncoder() -> any Encoder { SlotEncoder(slot: slot.appended(), codingPath: codingPath) }
}

/// Where every primitive ends up: the standard types encode themselves through this container.
private struct SingleSlotEncoder: SingleValueEncodingContainer {
    let slot: JSONSlot
    var codingPath: [any CodingKey]

    mutating func encodeNil() throws { slot.content = .value(.null) }
    mutating func encode(_ value: Bool) throws { slot.content = .value(.bool(value)) }
    mutating func encode(_ value: String) throws { slot.content = .value(.string(value)) }
    mutating func encode(_ value: Double) throws { slot.content = .value(.double(value)) }
    mutating func encode(_ value: Float) throws { slot.content = .value(.double(Double(value))) }
    mutating func encode(_ value: Int) throws { slot.content = .value(.int(value)) }
    mutating func encode(_ value: Int8) throws { slot.content = .value(.int(Int(value))) }
    mutating func encode(_ value: Int16) throws { slot.content = .value(.int(Int(value))) }
    mutating func encode(_ value: Int32) throws { slot.content = .value(.int(Int(value))) }
    mutating func encode(_ value: Int64) throws { slot.content = .value(.int(Int(value))) }
    mutating func encode(_ value: UInt) throws { try encodeInteger(value) }
    mutating func encode(_ value: UInt8) throws { slot.content = .value(.int(Int(value))) }
    mutating func encode(_ value: UInt16) throws { slot.content = .value(.int(Int(value))) }
    mutating func encode(_ value: UInt32) throws { slot.content = .value(.int(Int(value))) }
    mutating func encode(_ value: UInt64) throws { try encodeInteger(value) }
    mutating func encode<T: Encodable>(_ value: T) throws { try value.encode(to: SlotEncoder(slot: slot, codingPath: codingPath)) }

    private func encodeInteger<T: BinaryInteger>(_ value: T) throws {
        guard let int = Int(exactly: value) else {
            throw EncodingError.invalidValue(value, .init(codingPath: codingPath, debugDescription: "too large for JSON state"))
        }
        slot.content = .value(.int(int))
    }
}

// MARK: - Decoding

private struct ValueDecoder: Decoder {
    let json: JSON
    let path: JSONPath
    var codingPath: [any CodingKey] = []
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let object) = json else { throw StateError.typeMismatch(path, expected: "an object", found: json) }
        // Synthesized coding keys know only the type's properties: any other key is refused.
        for key in object.keys where Key(stringValue: key) == nil {
            throw StateError(path.appending(key), "unknown field")
        }
        return KeyedDecodingContainer(KeyedValueDecoder(object: object, path: path, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
        guard case .array(let items) = json else { throw StateError.typeMismatch(path, expected: "an array", found: json) }
        return UnkeyedValueDecoder(items: items, path: path, codingPath: codingPath)
    }

    func singleValueContainer() throws -> any SingleValueDecodingContainer {
        SingleValueDecoder(json: json, path: path, codingPath: codingPath)
    }
}

private struct KeyedValueDecoder<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let object: JSONObject
    let path: JSONPath
    var codingPath: [any CodingKey]
    var allKeys: [Key] { object.keys.compactMap(Key.init(stringValue:)) }

    func contains(_ key: Key) -> Bool { object[key.stringValue] != nil }

    private func decoder(_ key: Key) throws -> ValueDecoder {
        guard let json = object[key.stringValue] else { throw StateError(path.appending(key.stringValue), "missing field") }
        return ValueDecoder(json: json, path: path.appending(key.stringValue), codingPath: codingPath + [key])
    }

    func decodeNil(forKey key: Key) throws -> Bool { if case .null = try decoder(key).json { true } else { false } }
    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T { try T(from: decoder(key)) }
    func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws -> KeyedDecodingContainer<NestedKey> {
        try decoder(key).container(keyedBy: type)
    }
    func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer { try decoder(key).unkeyedContainer() }
    func superDecoder() throws -> any Decoder { ValueDecoder(json: object["super"] ?? .null, path: path.appending("super"), codingPath: codingPath) }
    func superDecoder(forKey key: Key) throws -> any Decoder { try decoder(key) }
}

private struct UnkeyedValueDecoder: UnkeyedDecodingContainer {
    let items: [JSON]
    let path: JSONPath
    var codingPath: [any CodingKey]
    var currentIndex = 0
    var count: Int? { items.count }
    var isAtEnd: Bool { currentIndex >= items.count }

    init(items: [JSON], path: JSONPath, codingPath: [any CodingKey]) {
        self.items = items
        self.path = path
        self.codingPath = codingPath
    }

    private mutating func next() throws -> ValueDecoder {
        guard !isAtEnd else { throw StateError(path.appending(index: currentIndex), "missing element") }
        defer { currentIndex += 1 }
        return ValueDecoder(json: items[currentIndex], path: path.appending(index: currentIndex), codingPath: codingPath)
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, case .null = items[currentIndex] else { return false }
        currentIndex += 1
        return true
    }
    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T { try T(from: next()) }
    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws -> KeyedDecodingContainer<NestedKey> {
        try next().container(keyedBy: type)
    }
    mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer { try next().unkeyedContainer() }
    mutating func superDecoder() throws -> any Decoder { try next() }
}

/// Where every primitive is read: the same rules as the state codecs (`.int`, `.double`, …).
private struct SingleValueDecoder: SingleValueDecodingContainer {
    let json: JSON
    let path: JSONPath
    var codingPath: [any CodingKey]

    func decodeNil() -> Bool { if case .null = json { true } else { false } }
    func decode(_ type: Bool.Type) throws -> Bool { try StateCodec.bool.decode(json, path, nil) }
    func decode(_ type: String.Type) throws -> String { try StateCodec.string.decode(json, path, nil) }
    func decode(_ type: Double.Type) throws -> Double { try StateCodec.double.decode(json, path, nil) }
    func decode(_ type: Float.Type) throws -> Float { Float(try StateCodec.double.decode(json, path, nil)) }
    func decode(_ type: Int.Type) throws -> Int { try StateCodec.int.decode(json, path, nil) }
    func decode(_ type: Int8.Type) throws -> Int8 { try integer() }
    func decode(_ type: Int16.Type) throws -> Int16 { try integer() }
    func decode(_ type: Int32.Type) throws -> Int32 { try integer() }
    func decode(_ type: Int64.Type) throws -> Int64 { try integer() }
    func decode(_ type: UInt.Type) throws -> UInt { try integer() }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try integer() }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try integer() }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try integer() }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try integer() }
    func decode<T: Decodable>(_ type: T.Type) throws -> T { try T(from: ValueDecoder(json: json, path: path, codingPath: codingPath)) }

    private func integer<T: FixedWidthInteger>() throws -> T {
        let value = try StateCodec.int.decode(json, path, nil)
        guard let exact = T(exactly: value) else { throw StateError(path, "must be between \(T.min) and \(T.max)") }
        return exact
    }
}
