import NavServer
import Testing

/// Flags win over the environment, the environment over defaults.
@Suite struct ConfigurationTests {
    /// A variable a flag overrides is not even read: platforms set `PORT` for their own reasons,
    /// and `--port` must be enough to run beside whatever they put in it.
    @Test func aFlagOverridesItsVariableWithoutReadingIt() throws {
        let configuration = try ServerConfiguration.parse(arguments: ["--port", "18341"], environment: ["PORT": "web"])
        #expect(configuration.port == 18341)
        #expect(throws: ServerConfiguration.Invalid.self, "without the flag, the variable is read, and refused") {
            try ServerConfiguration.parse(arguments: [], environment: ["PORT": "web"])
        }
    }

    /// An empty variable is unset, as shells and container files leave them; an empty flag is not.
    @Test func anEmptyVariableCountsAsUnset() throws {
        let configuration = try ServerConfiguration.parse(arguments: [], environment: ["PORT": "", "NAVD_DATA_DIR": "", "NAVD_LOG_REQUESTS": ""])
        let defaults = try ServerConfiguration.parse(arguments: [], environment: [:])
        #expect(configuration.port == defaults.port)
        #expect(configuration.dataDirectory == defaults.dataDirectory)
        #expect(configuration.logRequests == defaults.logRequests)
        #expect(throws: ServerConfiguration.Invalid.self) {
            try ServerConfiguration.parse(arguments: ["--port", ""], environment: [:])
        }
    }

    /// Where SIGUSR1's copies go: the flag, else the variable, else (nil) `backups` in the data
    /// directory; an empty flag is refused.
    @Test func theBackupDirectoryComesFromItsFlagOrVariable() throws {
        #expect(try ServerConfiguration.parse(arguments: [], environment: [:]).backupDirectory == nil)
        #expect(try ServerConfiguration.parse(arguments: [], environment: ["NAVD_BACKUP_DIR": "/b"]).backupDirectory == "/b")
        #expect(try ServerConfiguration.parse(arguments: ["--backup-dir", "/c"], environment: ["NAVD_BACKUP_DIR": "/b"]).backupDirectory == "/c")
        #expect(throws: ServerConfiguration.Invalid.self) {
            try ServerConfiguration.parse(arguments: ["--backup-dir", ""], environment: [:])
        }
    }
}
