@testable import NavigationCore
import Testing

@Suite struct JSONTests {
    @Test(arguments: [
        #"{"a":1,"b":[true,false,null],"c":"x\"y\\z\n","d":-2.5,"e":{}}"#,
        #"[]"#, #""é ☃ 𝄞""#, #"0"#, #"-0.5"#, #"1e3"#,
    ])
    func parsesAndWritesRoundTrip(_ text: String) throws {
        let value = try JSONParser.parse(text)
        #expect(try JSONParser.parse(value.text) == value)
    }

    /// A state's bound is kept in these sizes, so they must be what the writer writes.
    @Test(arguments: [
        #"{"a":1,"b":[true,false,null],"c":"x\"y\\z\n\t\r\u0001\u001f","d":-2.5,"e":{},"f":[]}"#,
        #"[]"#, #"{}"#, #"[[],{},[1]]"#, #""é ☃ 𝄞""#, #"0"#, #"-0"#, #"-0.5"#, #"1e3"#, #"1e300"#, #"123456789012"#,
        #"-9223372036854775808"#, #"9223372036854775807"#, #"0.1"#, #"{"":""}"#,
    ])
    func sizesAreWhatTheWriterWrites(_ text: String) throws {
        let value = try JSONParser.parse(text)
        #expect(JSONWriter.size(value) == value.bytes.count, "\(value.text)")
    }

    /// Requests nest at most 256 deep; what navd stored itself is read back to 1,000, since a
    /// derived document (a tree, an event) nests deeper than the request that built it.
    @Test func storedDocumentsAreReadDeeperThanRequests() throws {
        func nested(_ depth: Int) -> [UInt8] { Array((String(repeating: "[", count: depth) + String(repeating: "]", count: depth)).utf8) }
        #expect(throws: Never.self) { try JSONParser.parse(nested(JSONParser.maximumDepth)) }
        #expect(throws: JSONSyntaxError.self) { try JSONParser.parse(nested(JSONParser.maximumDepth + 1)) }
        let deep = try JSONParser.parse(nested(JSONParser.storedDocumentDepth), maximumDepth: JSONParser.storedDocumentDepth)
        #expect(deep.bytes == nested(JSONParser.storedDocumentDepth))
        #expect(throws: JSONSyntaxError.self) {
            try JSONParser.parse(nested(JSONParser.storedDocumentDepth + 1), maximumDepth: JSONParser.storedDocumentDepth)
        }
    }

    @Test func keepsKeyOrderAndComparesWithoutIt() throws {
        let value = try JSONParser.parse(#"{"b":1,"a":2}"#)
        #expect(value.text == #"{"b":1,"a":2}"#)
        #expect(value == (try JSONParser.parse(#"{"a":2,"b":1}"#)))
        #expect(JSON.int(1) == JSON.double(1))
    }

    @Test func escapesControlCharactersAndDecodesUnicodeEscapes() throws {
        #expect(JSON.string("a\u{01}b").text == #""a\u0001b""#)
        #expect(try JSONParser.parse(#""\u00e9\ud834\udd1e""#) == .string("é𝄞"))
    }

    /// Every ASCII character, escaped or copied in runs, at the start, middle and end of a text.
    @Test func writesEveryCharacterSoThatItReadsBack() throws {
        let ascii = String(decoding: (0..<128).map { UInt8($0) }, as: UTF8.self)
        for text in [ascii, "é" + ascii + "𝄞", String(repeating: "y", count: 70_000) + "\"\n", "\u{1F}"] {
            let written = JSON.string(text).text
            #expect(try JSONParser.parse(written) == .string(text))
            #expect(!written.utf8.dropFirst().dropLast().contains { $0 < 0x20 })
        }
        #expect(JSON.string("\"\\\n\r\t\u{08}\u{1F}").text == #""\"\\\n\r\t\u0008\u001f""#)
    }

    @Test(arguments: [
        "", "{", "[1,]", #"{"a" 1}"#, "01", "1.", "-", "tru", #""\x""#, #""\ud834""#, #"{"a":1,"a":2}"#,
        "1 2", "\"\u{01}\"", "nan", "1e999",
    ])
    func rejectsMalformedInput(_ text: String) {
        #expect(throws: JSONSyntaxError.self) { try JSONParser.parse(text) }
    }

    @Test func rejectsInvalidUTF8AndDeepNesting() {
        #expect(throws: JSONSyntaxError.self) { try JSONParser.parse([0x22, 0xFF, 0xFE, 0x22]) }
        let deep = String(repeating: "[", count: 10_000) + String(repeating: "]", count: 10_000)
        #expect(throws: JSONSyntaxError.self) { try JSONParser.parse(deep) }
    }

    @Test func writesIntegersAndDoubles() {
        #expect(JSON.int(Int.min).text == "-9223372036854775808")
        #expect(JSON.double(0.25).text == "0.25")
        #expect(JSON.double(1).text == "1.0")
        #expect(JSON.double(.infinity).text == "null")
    }
}

@Suite struct EventLogTests {
    func event(_ sequence: Int) -> NavigationEvent { NavigationEvent(sequence: sequence, kind: .state, data: [:]) }

    @Test func keepsTheLastEventsAndKnowsWhenItCannotResume() {
        var log = EventLog(capacity: 3, byteLimit: 1 << 20)
        for sequence in 1...5 { log.append(event(sequence)) }
        #expect(log.events(after: 2, lastIssued: 5)?.map(\.sequence) == [3, 4, 5])
        #expect(log.events(after: 4, lastIssued: 5)?.map(\.sequence) == [5])
        #expect(log.events(after: 5, lastIssued: 5)?.isEmpty == true)
        #expect(log.events(after: 1, lastIssued: 5) == nil)
        #expect(log.events(after: 6, lastIssued: 5) == nil)
        #expect(log.events(after: -1, lastIssued: 5) == nil)
    }

    @Test func anEmptyLogResumesFromZero() {
        let log = EventLog(capacity: 3, byteLimit: 1 << 20)
        #expect(log.events(after: 0, lastIssued: 0)?.isEmpty == true)
    }
}

@Suite struct JSONPathTests {
    @Test func readsAsClientsWriteIt() {
        #expect(JSONPath("state").appending("path").appending(index: 2).appending("counter").appending("count").description
            == "state.path[2].counter.count")
    }
}

@Suite struct LargeObjectTests {
    @Test func manyKeysParseInLinearTimeAndDuplicatesAreStillFound() throws {
        let keys = (0..<100_000).map { #""k\#($0)":\#($0)"# }
        let started = ContinuousClock.now
        let object = try JSONParser.parse("{" + keys.joined(separator: ",") + "}")
        #expect(object.objectValue?.count == 100_000)
        #expect(ContinuousClock.now - started < .seconds(10))
        let duplicate = "{" + keys.prefix(40).joined(separator: ",") + #","k7":1}"#
        #expect(throws: JSONSyntaxError.self) { try JSONParser.parse(duplicate) }
    }
}
