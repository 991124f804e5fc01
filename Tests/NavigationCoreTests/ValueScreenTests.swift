@testable import NavigationCore
import Testing

/// `Screen.value`: a `Codable` value type's fields without a hand-written list, under the same
/// rules as declared fields (defaults for missing keys, unknown keys refused with their path).
@Suite struct ValueScreenTests {
    struct Place: Codable, Equatable, Sendable {
        var name: String
        var rank: Int
        var score: Double
        var visited: Bool
        var tags: [String]
        var note: String?
        var origin: Point
    }

    struct Point: Codable, Equatable, Sendable {
        var x: Int
        var y: Int
    }

    static let empty = Place(name: "", rank: 0, score: 0, visited: false, tags: [], note: nil, origin: Point(x: 0, y: 0))
    static let screen = Screen<Place>.value("Place", refining: [Field("rank", \.rank, .int(in: -10...10)),
                                                                Field("score", \.score, .double(in: 0...1))]) { empty }

    func decode(_ text: String, into existing: Place? = nil) throws -> Place {
        try Self.screen.codec.decode(try JSONParser.parse(text), JSONPath("state"), existing)
    }

    func failure(_ text: String) -> StateError? {
        do { _ = try decode(text); return nil } catch let error as StateError { return error } catch { return nil }
    }

    @Test func theFieldsAreTheTypesKeysInOrderWithTheirTypes() {
        let fields = Self.screen.body.fields
        #expect(fields.map(\.name) == ["name", "rank", "score", "visited", "tags", "note", "origin"])
        #expect(fields.map(\.typeName) == ["string", "integer", "number", "boolean", "array", "any?", "object"])
        #expect(!fields.contains { $0.isBindable || $0.holdsChildren })
    }

    @Test func encodesAndDecodesRoundTrip() throws {
        let place = Place(name: "Café ☃", rank: -3, score: 0.25, visited: true, tags: ["a", "b"], note: "n", origin: Point(x: 1, y: 2))
        let json = Self.screen.codec.encode(place)
        #expect(json.text == #"{"name":"Café ☃","rank":-3,"score":0.25,"visited":true,"tags":["a","b"],"note":"n","origin":{"x":1,"y":2}}"#)
        #expect(try Self.screen.codec.decode(json, JSONPath("state"), nil) == place)
        #expect(Self.screen.codec.encode(Self.empty)["note"] == .null, "an absent optional is a null field")
    }

    @Test func anOptionalIsSetAndClearedByDeepLink() throws {
        #expect(try decode(#"{"note":"here"}"#).note == "here")
        var existing = Self.empty
        existing.note = "there"
        #expect(try decode(#"{"note":null}"#, into: existing).note == nil)
        #expect(failure(#"{"note":3}"#) == StateError(JSONPath("state.note"), "expected a string, found number"))
    }

    @Test func missingKeysTakeTheirDefaultsEvenOverAnExistingValue() throws {
        #expect(try decode(#"{"rank":7}"#) == Place(name: "", rank: 7, score: 0, visited: false, tags: [], note: nil, origin: Point(x: 0, y: 0)))
        var existing = Self.empty
        existing.name = "old"
        existing.visited = true
        #expect(try decode(#"{"score":1}"#, into: existing) == Place(
            name: "", rank: 0, score: 1, visited: false, tags: [], note: nil, origin: Point(x: 0, y: 0)))
    }

    @Test(arguments: [
        (#"{"colour":"red"}"#, "state.colour", "unknown field of Place"),
        (#"{"origin":{"x":1,"y":2,"z":3}}"#, "state.origin.z", "unknown field"),
        (#"{"origin":{"x":1}}"#, "state.origin.y", "missing field"),
        (#"{"origin":[1,2]}"#, "state.origin", "expected an object, found array"),
        (#"{"rank":"1"}"#, "state.rank", "expected an integer, found string"),
        (#"{"rank":1.5}"#, "state.rank", "expected an integer, found number"),
        (#"{"rank":11}"#, "state.rank", "must be between -10 and 10"),
        (#"{"rank":-11}"#, "state.rank", "must be between -10 and 10"),
        (#"{"tags":["a",2]}"#, "state.tags[1]", "expected a string, found number"),
        (#"{"visited":null}"#, "state.visited", "expected a boolean, found null"),
        (#"{"score":2}"#, "state.score", "must be between 0.0 and 1.0"),
        (#"{"score":"high"}"#, "state.score", "expected a number, found string"),
        (#"[]"#, "state", "expected an object (Place state), found array"),
    ])
    func badValuesAreRefusedWithTheirPath(_ text: String, _ path: String, _ reason: String) {
        #expect(failure(text) == StateError(JSONPath(path), reason))
    }

    @Test func aFieldIsAssignedAlone() throws {
        var place = Self.empty
        place.rank = 4
        let field = try #require(Self.screen.body.fields.first { $0.name == "name" })
        try field.assign(&place, .string("x"), JSONPath("state").appending("name"))
        #expect(place.name == "x" && place.rank == 4)
        #expect(throws: StateError(JSONPath("state.name"), "expected a string, found boolean")) {
            try field.assign(&place, .bool(true), JSONPath("state").appending("name"))
        }
        #expect(place.name == "x", "a refused value changes nothing")
    }
}
