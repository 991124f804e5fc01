import HTTP
import NavServer
import Testing

/// `--io` / `NAVD_IO` choose what drives the event loops; a server on either serves the same.
@Suite struct IOBackendOptionTests {
    @Test func theFlagAndTheEnvironmentChooseTheBackend() throws {
        #expect(try ServerConfiguration.parse(arguments: [], environment: [:]).io == .platformDefault)
        #expect(try ServerConfiguration.parse(arguments: ["--io", "dispatch"], environment: [:]).io == .dispatch)
        #expect(try ServerConfiguration.parse(arguments: [], environment: ["NAVD_IO": "dispatch"]).io == .dispatch)
        #expect(try ServerConfiguration.parse(arguments: ["--io", "dispatch"], environment: ["NAVD_IO": "epoll"]).io == .dispatch,
                "the flag wins over the environment")
        for bad in ["kqueue", "", "Epoll"] {
            #expect(throws: ServerConfiguration.Invalid.self, "\(bad)") {
                try ServerConfiguration.parse(arguments: ["--io", bad], environment: [:])
            }
        }
    }

    /// Each backend this platform has serves a session end to end, whichever the suite runs on.
    @Test(arguments: IOBackend.available)
    func everyBackendServesASession(_ backend: IOBackend) async throws {
        let server = try await TestServer { $0.io = backend }
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        #expect(try await client.act(id, token: token, "incrementButtonTapped").status == 200)
        #expect(try await client.get("/sessions/\(id)", token: token).json["state"]?["count"] == 1)
        await server.stop()
    }
}
