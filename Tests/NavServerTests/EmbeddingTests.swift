import NavServer
import NavigationCore
import Testing

/// What a host embedding the server names, with `NavServer` as its only server import: the
/// store's types come with it.
@Suite struct EmbeddingTests {
    @Test func theStoreAConfigurationNamesOpensWithNavServerAlone() throws {
        var configuration = ServerConfiguration()
        configuration.store = .memory
        let memory: (any SessionStorage)? = try NavigationServer.openStorage(configuration)
        #expect(memory == nil, "a memory store keeps nothing between processes")
        configuration.store = .postgres
        configuration.databaseURL = nil
        #expect(throws: StorageError.cannotOpen("--store postgres needs --database-url or DATABASE_URL")) {
            try NavigationServer.openStorage(configuration)
        }
    }
}
