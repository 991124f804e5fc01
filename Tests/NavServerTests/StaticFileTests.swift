import Foundation
@testable import NavServer
import WebClient
import Testing
import TestSupport

/// `GET /`, `GET /client.js`, the inspector's files and `GET /openapi.yaml`: served from the
/// binary, without credentials, with a self-only Content-Security-Policy and validators.
@Suite struct StaticFileTests {
    static let files: [(path: String, file: String, type: String)] = [
        ("/", "Sources/WebClient/Resources/index.html", "text/html; charset=utf-8"),
        ("/client.js", "Sources/WebClient/Resources/navd-client.js", "text/javascript; charset=utf-8"),
        ("/inspector.js", "Sources/WebClient/Resources/inspector.js", "text/javascript; charset=utf-8"),
        ("/inspector.css", "Sources/WebClient/Resources/inspector.css", "text/css; charset=utf-8"),
        // The repository's own document, not a copy: what clients generate from is what is committed.
        ("/openapi.yaml", "openapi.yaml", "application/yaml; charset=utf-8"),
    ]

    /// The repository's copy (a path from the package root), which the binary must serve byte for byte.
    static func source(_ file: String) throws -> [UInt8] {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        return Array(try Data(contentsOf: root.appendingPathComponent(file)))
    }

    @Test func theFilesAreServedAsTheyAreInTheRepositoryWithoutCredentials() async throws {
        let server = try await TestServer()
        let client = try server.client()
        for (path, file, type) in Self.files {
            let source = try Self.source(file)
            let response = try await client.request("GET", path)
            #expect(response.status == 200, "\(path)")
            #expect(response.body == source, "\(path) is \(file)")
            #expect(!response.body.isEmpty)
            #expect(response.header("content-type") == type)
            #expect(response.header("x-content-type-options") == "nosniff")
            #expect(response.header("cache-control") == "no-cache")
            #expect(response.header("referrer-policy") == "no-referrer")
            let policy = try #require(response.header("content-security-policy"))
            #expect(policy.contains("default-src 'none'") && policy.contains("script-src 'self'") && policy.contains("connect-src 'self'"))
            #expect(!policy.contains("unsafe-inline") && !policy.contains("http"))
            let tag = try #require(response.header("etag"))
            #expect(tag.hasPrefix("\"") && tag.hasSuffix("\"") && tag.count == 18)

            // Revalidation: the same tag is 304 with no body; any other is the file again.
            let fresh = try await client.request("GET", path, headers: [("If-None-Match", "\"0000000000000000\", W/\(tag)")])
            #expect(fresh.status == 304 && fresh.body.isEmpty && fresh.header("etag") == tag)
            #expect(try await client.request("GET", path, headers: [("If-None-Match", "*")]).status == 304)
            #expect(try await client.request("GET", path, headers: [("If-None-Match", "\"0000000000000000\"")]).status == 200)
            let head = try await client.request("HEAD", path)
            #expect(head.status == 200 && head.header("content-length") == "\(source.count)")
            #expect(try await client.request("POST", path).status == 405)
        }
        #expect(try await client.request("GET", "/client.jsx").status == 404)
        #expect(try await client.request("GET", "/index.html").status == 404)
        #expect(try await client.request("GET", "/openapi.yml").status == 404)
        await server.stop()
    }

    /// The page loads nothing from elsewhere and runs no inline script or style (the policy forbids both).
    @Test func thePageUsesOnlyItsOwnFiles() throws {
        let page = String(decoding: try Self.source("Sources/WebClient/Resources/index.html"), as: UTF8.self)
        #expect(page.contains(#"<script type="module" src="/inspector.js"></script>"#))
        #expect(page.contains(#"<link rel="stylesheet" href="/inspector.css">"#))
        #expect(!page.contains("http://") && !page.contains("https://") && !page.contains("style=\"") && !page.contains("<style"))
        #expect(page.components(separatedBy: "<script").count == 2, "one script, the module")
        let script = String(decoding: try Self.source("Sources/WebClient/Resources/inspector.js"), as: UTF8.self)
        #expect(script.contains(#"from "/client.js""#))
        #expect(!script.contains("http://") && !script.contains("https://") && !script.contains("?token="))
    }

    /// The document describes its own path, so generators and schemathesis see it too.
    @Test func theDocumentListsItsOwnPath() throws {
        let document = String(decoding: try Self.source("openapi.yaml"), as: UTF8.self)
        #expect(document.contains("\n  /openapi.yaml:\n"))
        #expect(document.contains("application/yaml; charset=utf-8:"))
    }

    @Test func entityTagsTellFilesApart() {
        #expect(Set(WebAsset.all.values.map(\.entityTag)).count == WebAsset.all.count)
        #expect(StaticFiles.matches(" \"a\" ,\tW/\"b\" ", "\"b\""))
        #expect(!StaticFiles.matches("\"a\"", "\"b\""))
    }
}
