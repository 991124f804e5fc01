import DemoHost
import Foundation
@testable import NavServer
import NavigationCore
import Testing

/// `openapi.yaml`'s generated part: made from the features' declarations, committed as `navd
/// openapi` writes it, and served by each server for the features it hosts.
@Suite struct OpenAPIDocumentTests {
    static func committed() throws -> String {
        String(decoding: try StaticFileTests.source("openapi.yaml"), as: UTF8.self)
    }

    static func demoCatalog() -> FeatureCatalog {
        demoCatalog(with: FeatureServices(configuration: ServerConfiguration(), metrics: Metrics()))
    }

    static func demoCatalog(with services: FeatureServices) -> FeatureCatalog {
        DemoFeatures.catalog(DemoSettings(), services)
    }

    /// The drift check: regenerating the committed file from the demo features' declarations
    /// changes nothing. When it fails, run `swift run navd openapi --output openapi.yaml`.
    @Test func theCommittedDocumentIsWhatTheDeclarationsProduce() throws {
        let committed = try Self.committed()
        #expect(committed.contains(OpenAPIDocument.beginMarker) && committed.contains(OpenAPIDocument.endMarker))
        let regenerated = OpenAPIDocument.render(committed, for: Self.demoCatalog())
        #expect(regenerated == committed, "openapi.yaml is stale: run `swift run navd openapi --output openapi.yaml`")
    }

    /// `navd openapi` writes the document a running navd serves (the committed one).
    @Test func theCommandWritesTheDocument() throws {
        let navd = try #require(ProcessTests.navd, "navd binary not built")
        let process = Process()
        let output = Pipe()
        process.executableURL = navd
        process.arguments = ["openapi"]
        process.standardOutput = output
        try process.run()
        let written = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        #expect(process.terminationStatus == 0)
        #expect(String(decoding: written, as: UTF8.self) == (try Self.committed()))

        let wrong = Process()
        wrong.executableURL = navd
        wrong.arguments = ["openapi", "--outptu", "x"]
        wrong.standardError = Pipe()
        try wrong.run()
        wrong.waitUntilExit()
        #expect(wrong.terminationStatus == 2)
    }

    /// Every screen's state is a schema, typed field by field from its codecs; an enum is a
    /// component of its own; a screen that contains itself refers to its own component.
    @Test func stateSchemasFollowTheCodecs() throws {
        let schemas = OpenAPIDocument.schemas(for: Self.demoCatalog())
        let counter = try #require(schemas["CounterState"])
        #expect(counter["additionalProperties"] == false)
        #expect(counter["required"] == nil, "a deep link may leave any field out")
        #expect(counter["properties"]?["count"] == ["type": "integer"])
        #expect(counter["properties"]?["destination"] == ["anyOf": [["$ref": "#/components/schemas/CounterDestination"], ["type": "null"]]])
        let destination = try #require(schemas["CounterDestination"]?["oneOf"]?.arrayValue)
        #expect(destination.map { $0["required"] } == [["fact"], ["settings"], ["alert"]])
        #expect(destination[0]["properties"]?["fact"] == ["$ref": "#/components/schemas/FactState"])
        #expect(schemas["NestedState"]?["properties"]?["child"] == ["anyOf": [["$ref": "#/components/schemas/NestedState"], ["type": "null"]]])
        #expect(schemas["NetworkState"]?["properties"]?["connectivity"] == ["type": "number", "minimum": 0, "maximum": 1])
        #expect(schemas["WifiState"]?["properties"]?["selectedNetworkID"] == ["type": ["string", "null"]])
        #expect(schemas["FeatureName"]?["enum"]?.arrayValue?.count == Self.demoCatalog().screens.count)

        // `feature` decides the state's schema.
        let request = try #require(schemas["CreateSessionRequest"])
        #expect(request["discriminator"]?["propertyName"] == "feature")
        #expect(request["oneOf"]?.arrayValue?.count == 5)
        #expect(schemas["CreateAppSession"]?["properties"]?["feature"] == ["type": "string", "const": "app"])
        #expect(schemas["CreateAppSession"]?["properties"]?["state"]?["anyOf"]?[0] == ["$ref": "#/components/schemas/AppState"])
    }

    /// A server hosting other features serves a document about those, not the demo's.
    @Test func aServerDescribesTheFeaturesItHosts() throws {
        let notes = Screen<Notes>("notes", make: { Notes() }) {
            Field("text", \.text, bindable: true)
            Field("stars", \.stars, .int(in: 0...5), bindable: true)
        }
        let catalog = FeatureCatalog(hosting: [.init(notes)])
        #expect(OpenAPIDocument.schemas(for: catalog)["NotesState"]?["properties"]?["stars"] == ["type": "integer", "minimum": 0, "maximum": 5])
        let document = OpenAPIDocument.render(try Self.committed(), for: catalog)
        #expect(document.contains("    NotesState:\n"))
        #expect(document.contains("    CreateNotesSession:\n"))
        #expect(!document.contains("    CounterState:\n"))
        #expect(document.hasPrefix("openapi: 3.1.0\n"))
    }

    /// A host's server names itself in the document's `info`, not navd, and says what in the
    /// document is navd's demo (the examples); navd's own document is the committed one.
    @Test func aHostsServerNamesItselfInTheDocument() throws {
        var configuration = ServerConfiguration()
        configuration.serverName = "notes-server"
        configuration.serverVersion = "2.3.0"
        let notes = Screen<Notes>("notes", make: { Notes() }) { Field("text", \.text, bindable: true) }
        let document = NavigationServer(configuration: configuration) { _ in FeatureCatalog(hosting: [.init(notes)]) }.openAPIDocument
        let info = document.split(separator: "\n").prefix(12)
        let title = try #require(info.first { $0.hasPrefix("  title: ") })
        #expect(title.contains("notes-server") && title.contains("navd \(BuildInfo.version)"), "\(title)")
        #expect(info.contains(#"  version: "2.3.0""#))
        #expect(info.contains { $0.contains("This server hosts its own features") })
        #expect(document.contains("    NotesState:\n"))
        #expect(!document.contains("title: navd"))
        let navd = NavigationServer(configuration: ServerConfiguration()) { Self.demoCatalog(with: $0) }.openAPIDocument
        #expect(navd == (try Self.committed()))
    }

    final class Notes {
        var text = ""
        var stars = 0
    }
}
