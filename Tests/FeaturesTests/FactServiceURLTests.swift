@testable import Features
import Testing

/// The base URL is read by libcurl's parser, the one that will connect: what it accepts, and
/// where a fact's number goes.
@Suite struct FactServiceURLTests {
    @Test(arguments: ["http://numbersapi.com", "https://facts.example:8443/api/", "HTTP://Example.COM"])
    func acceptsHTTPAndHTTPSWithAHost(_ text: String) {
        #expect(FactServiceURL(text) != nil)
    }

    @Test(arguments: ["", "numbersapi.com", "ftp://numbersapi.com", "file:///etc/passwd", "http://", "gopher://a/", "http://exa mple.com/"])
    func refusesEverythingElse(_ text: String) {
        #expect(FactServiceURL(text) == nil)
    }

    @Test func theNumberIsAPathSegmentAfterTheBasePath() throws {
        #expect(FactServiceURL.numbersAPI.description == "http://numbersapi.com/")
        #expect(FactServiceURL.numbersAPI.host == "numbersapi.com")
        let api = try #require(FactServiceURL("https://Facts.Example:8443/api?lang=en"))
        #expect(api.host == "facts.example")
        #expect(api.url(for: 42) == "https://Facts.Example:8443/api/42?lang=en")
        #expect(FactServiceURL.numbersAPI.url(for: -7) == "http://numbersapi.com/-7")
        #expect(FactServiceURL("http://127.0.0.1:9/v1/")?.url(for: 0) == "http://127.0.0.1:9/v1/0")
    }
}
