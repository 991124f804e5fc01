import HTTP
import NavigationCore

/// Every setting of the server: a flag, and for the ones a container sets, an environment
/// variable. Flags win over the environment, the environment over defaults. A host adds the
/// settings of its own features with `ConfigurationOption`s (navd: the fact service, delays).
public struct ServerConfiguration: Sendable, Equatable {
    /// The address to listen on (`--host`, `NAVD_HOST`).
    public var host = "127.0.0.1"
    /// The port to listen on; 0 picks a free one (`--port`, `PORT`).
    public var port = 8080
    /// Sessions at once; more are refused with 503 (`--max-sessions`); nil for no limit.
    public var maxSessions: Int?
    /// Bytes all sessions may hold together, their state and kept events (`--max-session-memory`,
    /// see `MemoryBudget`); nil for a quarter of the memory navd may use (`AvailableMemory`).
    public var maxSessionMemory: Int?
    /// Bytes waiting for clients across all connections (`--max-output-buffer`); nil for an
    /// eighth of the memory navd may use (`AvailableMemory`). Past it, streams and answers their
    /// clients do not read are closed, their clients to resume.
    public var maxOutputBuffer: Int?
    /// Bytes of request bodies being received across all connections, and of those waiting for
    /// their answers (`--max-input-buffer`); nil for an eighth of the memory navd may use. The
    /// body that would take them past it is refused (503), and then bodies whose clients have
    /// stopped sending (408).
    public var maxInputBuffer: Int?
    /// Open connections at once; more are refused with 503 (`--max-connections`); nil for no limit.
    public var maxConnections: Int?
    /// Events kept for resuming, and how large a session's state may grow.
    public var sessionLimits = SessionLimits()
    /// Sessions nobody touched (no request, no open stream) for this long are ended.
    public var idleSessionTTL: Duration? = .seconds(3600)
    /// Browser pages allowed to call (`--cors-origin`, `--cors-headers`).
    public var cors = CORSPolicy()
    /// Which host names requests may be for (`--allowed-hosts`); nil for the standard policy of
    /// `host`, the address listened on.
    public var allowedHosts: HostPolicy?
    /// The host names requests may be for, as configured or by default.
    public var hostPolicy: HostPolicy { allowedHosts ?? .standard(listeningOn: host) }
    /// How often an idle event stream gets a comment line, so proxies keep it open.
    public var heartbeatInterval: Duration = .seconds(15)
    /// How long `?wait=true` waits for effects by default.
    public var waitTimeout: Duration = .seconds(10)
    /// After SIGTERM, how long `/readyz` answers 503 while everything is still served, so load
    /// balancers stop sending work before the drain.
    public var shutdownGrace: Duration = .zero
    /// `--check-health`: ask a running server's `/healthz` and exit, for container health checks.
    public var checkHealth = false
    /// Whether each request is logged as a JSON line (`--log-requests`).
    public var logRequests = true
    /// How long a client may take to send a request's head (a slow-loris defence); not a flag.
    public var headerTimeout: Duration = .seconds(10)
    /// What drives the event loops; `--io`, `NAVD_IO`.
    public var io: IOBackend = .platformDefault
    /// Where sessions live between processes.
    public var store: StoreKind = .sqlite
    /// The SQLite store's directory.
    public var dataDirectory = "navd-data"
    /// Where SIGUSR1 writes a copy of the SQLite store (`NavigationServer.backUp()`); nil is
    /// `backups` in the data directory.
    public var backupDirectory: String?
    /// The PostgreSQL store's connection URL (`--store postgres`); it may hold a password, so it
    /// is never printed.
    public var databaseURL: String?
    /// What serves, by name and version: the API document's `info` and the `listening` line
    /// name it. navd's own by default; `ServerMain.run` sets a host's `program` and `version`.
    public var serverName = "navd"
    /// See `serverName`.
    public var serverVersion = BuildInfo.version

    /// The session store engines.
    public enum StoreKind: String, Sendable, CaseIterable {
        /// An embedded SQLite database in the data directory: sessions survive restarts.
        case sqlite
        /// Nothing on disk: a restart ends every session.
        case memory
        /// A PostgreSQL database at `databaseURL`, shared by several nodes.
        case postgres
    }

    /// navd's defaults.
    public init() {}

    /// A setting that cannot be used; `navd` prints it and exits with code 2.
    public struct Invalid: Error, Equatable, CustomStringConvertible {
        public let description: String

        /// - Parameter description: starts with the flag at fault: `--port: "x" is not ...`.
        public init(description: String) {
            self.description = description
        }
    }

    /// What `--help` asks for.
    public struct HelpRequested: Error {}

    /// What `--version` asks for.
    public struct VersionRequested: Error {}

    private typealias Option = ConfigurationOption<ServerConfiguration>

    private static let options: [Option] = [
        Option(flag: "--host", environment: "NAVD_HOST", value: "ADDRESS", help: "address to listen on (default 127.0.0.1)") { config, value throws(Invalid) in
            guard HTTPServer.Configuration.isListenable(host: value) else {
                throw Invalid(description: "--host: \"\(value)\" is \(HTTPServer.Configuration.hostRequirement)")
            }
            config.host = value
        },
        Option(flag: "--port", environment: "PORT", value: "PORT", help: "TCP port, 0 for any free one (default 8080)") { config, value throws(Invalid) in
            config.port = try integer(value, "--port", in: 0...65535)
        },
        Option(flag: "--max-sessions", environment: "NAVD_MAX_SESSIONS", value: "N", help: "sessions at most; more are refused with 503 (default unlimited)") { config, value throws(Invalid) in
            config.maxSessions = try integer(value, "--max-sessions", in: 1...100_000_000)
        },
        Option(flag: "--max-session-memory", environment: "NAVD_MAX_SESSION_MEMORY", value: "BYTES", help: "state and kept events of all sessions together; past it no session is made, and none grows but by small steps (default a quarter of memory)") { config, value throws(Invalid) in
            config.maxSessionMemory = try integer(value, "--max-session-memory", in: (1 << 20)...(1 << 50))
        },
        Option(flag: "--max-connections", environment: "NAVD_MAX_CONNECTIONS", value: "N", help: "open connections at most; more get 503 and are closed (default unlimited)") { config, value throws(Invalid) in
            config.maxConnections = try integer(value, "--max-connections", in: 1...10_000_000)
        },
        Option(flag: "--max-output-buffer", environment: "NAVD_MAX_OUTPUT_BUFFER", value: "BYTES", help: "bytes waiting for clients on all connections; past it, clients that read nothing are cut, to resume (default an eighth of memory)") { config, value throws(Invalid) in
            config.maxOutputBuffer = try integer(value, "--max-output-buffer", in: (1 << 20)...(1 << 50))
        },
        Option(flag: "--max-input-buffer", environment: "NAVD_MAX_INPUT_BUFFER", value: "BYTES", help: "bytes of request bodies being received on all connections; a body past it gets 503, and then bodies whose clients stopped sending get 408 (default an eighth of memory)") { config, value throws(Invalid) in
            config.maxInputBuffer = try integer(value, "--max-input-buffer", in: (1 << 20)...(1 << 50))
        },
        Option(flag: "--event-buffer", environment: "NAVD_EVENT_BUFFER", value: "N", help: "events kept per session for resuming streams (default 1024)") { config, value throws(Invalid) in
            config.sessionLimits.eventBufferCount = try integer(value, "--event-buffer", in: 0...1_000_000)
        },
        Option(flag: "--event-buffer-bytes", environment: "NAVD_EVENT_BUFFER_BYTES", value: "BYTES", help: "encoded bytes of events kept per session (default 8388608)") { config, value throws(Invalid) in
            config.sessionLimits.eventBufferBytes = try integer(value, "--event-buffer-bytes", in: 0...(1 << 34))
        },
        Option(flag: "--max-path-length", environment: "NAVD_MAX_PATH_LENGTH", value: "N", help: "elements in one stack, items in a list sent as state (default 1000)") { config, value throws(Invalid) in
            config.sessionLimits.maxPathLength = try integer(value, "--max-path-length", in: 1...1_000_000)
        },
        Option(flag: "--max-state-nodes", environment: "NAVD_MAX_STATE_NODES", value: "N", help: "features on screen per session, objects and arrays in a state sent (default 10000)") { config, value throws(Invalid) in
            config.sessionLimits.maxNodes = try integer(value, "--max-state-nodes", in: 1...10_000_000)
        },
        Option(flag: "--max-string-bytes", environment: "NAVD_MAX_STRING_BYTES", value: "BYTES", help: "UTF-8 bytes of any one string in state (default 65536)") { config, value throws(Invalid) in
            config.sessionLimits.maxStringBytes = try integer(value, "--max-string-bytes", in: 1...(1 << 30))
        },
        Option(flag: "--max-state-bytes", environment: "NAVD_MAX_STATE_BYTES", value: "BYTES", help: "bytes of a session's state on screen, as JSON (default 4194304)") { config, value throws(Invalid) in
            config.sessionLimits.maxStateBytes = try integer(value, "--max-state-bytes", in: 1024...(1 << 40))
        },
        Option(flag: "--idle-session-ttl", environment: "NAVD_IDLE_SESSION_TTL", value: "SECONDS", help: "end sessions idle this long, 0 = never (default 3600)") { config, value throws(Invalid) in
            let seconds = try integer(value, "--idle-session-ttl", in: 0...31_536_000)
            config.idleSessionTTL = seconds == 0 ? nil : .seconds(seconds)
        },
        Option(flag: "--allowed-hosts", environment: "NAVD_ALLOWED_HOSTS", value: "NAMES", help: "host names requests may be for, comma-separated (.example.com: the names under it), or *; addresses always pass (default: .localhost on a loopback address, else *)") { config, value throws(Invalid) in
            do { config.allowedHosts = try HostPolicy.parse(value) } catch {
                throw Invalid(description: "--allowed-hosts: \(error)")
            }
        },
        Option(flag: "--cors-origin", environment: "NAVD_CORS_ORIGIN", value: "ORIGINS", help: "allow browser pages from these comma-separated origins, or * (default: no CORS)") { config, value throws(Invalid) in
            do { config.cors.origins = try CORSPolicy.parseOrigins(value) } catch {
                throw Invalid(description: "--cors-origin: \(error)")
            }
        },
        Option(flag: "--cors-headers", environment: "NAVD_CORS_HEADERS", value: "NAMES", help: "more request headers browser pages may send, comma-separated (e.g. traceparent)") { config, value throws(Invalid) in
            do { config.cors.extraHeaders = try CORSPolicy.parseHeaders(value) } catch {
                throw Invalid(description: "--cors-headers: \(error)")
            }
        },
        Option(flag: "--heartbeat-ms", environment: "NAVD_HEARTBEAT_MS", value: "MS", help: "comment line on idle event streams (default 15000)") { config, value throws(Invalid) in
            config.heartbeatInterval = .milliseconds(try integer(value, "--heartbeat-ms", in: 10...15_000))
        },
        Option(flag: "--shutdown-grace", environment: "NAVD_SHUTDOWN_GRACE", value: "SECONDS", help: "after SIGTERM, serve on this long with /readyz 503, then drain (default 0)") { config, value throws(Invalid) in
            config.shutdownGrace = .seconds(try integer(value, "--shutdown-grace", in: 0...3600))
        },
        Option(flag: "--io", environment: "NAVD_IO", value: "epoll|dispatch", help: "what drives the event loops (default epoll on Linux, dispatch elsewhere)") { config, value throws(Invalid) in
            guard let backend = IOBackend(rawValue: value) else { throw Invalid(description: "--io: \"\(value)\" is not epoll or dispatch") }
            guard IOBackend.available.contains(backend) else { throw Invalid(description: "--io: \(value) is not available on this platform") }
            config.io = backend
        },
        Option(flag: "--store", environment: "NAVD_STORE", value: "sqlite|postgres|memory", help: "where sessions live between restarts (default sqlite)") { config, value throws(Invalid) in
            guard let kind = StoreKind(rawValue: value) else { throw Invalid(description: "--store: \"\(value)\" is not sqlite, postgres or memory") }
            config.store = kind
        },
        Option(flag: "--data-dir", environment: "NAVD_DATA_DIR", value: "PATH", help: "the SQLite store's directory (default ./navd-data)") { config, value throws(Invalid) in
            guard !value.isEmpty else { throw Invalid(description: "--data-dir: must not be empty") }
            config.dataDirectory = value
        },
        Option(flag: "--backup-dir", environment: "NAVD_BACKUP_DIR", value: "PATH", help: "where SIGUSR1 writes a copy of the SQLite store (default DATA-DIR/backups)") { config, value throws(Invalid) in
            guard !value.isEmpty else { throw Invalid(description: "--backup-dir: must not be empty") }
            config.backupDirectory = value
        },
        Option(flag: "--database-url", environment: "DATABASE_URL", value: "URL", help: "the PostgreSQL store's database, postgresql://user:password@host:port/db (--store postgres)") { config, value throws(Invalid) in
            guard !value.isEmpty else { throw Invalid(description: "--database-url: must not be empty") }
            config.databaseURL = value
        },
        Option(flag: "--log-requests", environment: "NAVD_LOG_REQUESTS", value: "on|off", help: "one JSON line per request on stdout (default on)") { config, value throws(Invalid) in
            switch value {
            case "on", "true", "1": config.logRequests = true
            case "off", "false", "0": config.logRequests = false
            default: throw Invalid(description: "--log-requests: \"\(value)\" is neither on nor off")
            }
        },
    ]

    /// Reads the environment, then the flags.
    public static func parse(arguments: [String], environment: [String: String]) throws -> ServerConfiguration {
        var none = NoSettings()
        return try parse(arguments: arguments, environment: environment, settings: &none, options: [])
    }

    /// Reads the environment, then the flags: the server's and, into `settings`, a host's own.
    public static func parse<Settings>(arguments: [String], environment: [String: String],
                                       settings: inout Settings, options extra: [ConfigurationOption<Settings>]) throws -> ServerConfiguration {
        var config = ServerConfiguration()
        let entries = entries(extra)
        var given: [(entry: Entry<Settings>, value: String)] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            switch argument {
            case "--help", "-h": throw HelpRequested()
            case "--version": throw VersionRequested()
            case "--check-health": config.checkHealth = true; continue
            default: break
            }
            let (flag, inline) = argument.split(separator: "=", maxSplits: 1).map(String.init).pair
            guard let entry = entries.first(where: { $0.flag == flag }) else {
                throw Invalid(description: "unknown option \(argument); see --help")
            }
            let value: String
            if let inline {
                value = inline
            } else {
                guard index < arguments.count else { throw Invalid(description: "\(flag) needs a value (\(entry.value))") }
                value = arguments[index]
                index += 1
            }
            given.append((entry, value))
        }
        // A variable a flag overrides is not read at all (`PORT` is set by platforms for their
        // own reasons), and an empty one counts as unset, as shells and container files leave them.
        for entry in entries where !given.contains(where: { $0.entry.flag == entry.flag }) {
            if let name = entry.environment, let value = environment[name], !value.isEmpty {
                do { try entry.apply(&config, &settings, value) } catch {
                    throw Invalid(description: "\(name): " + error.description.drop(while: { $0 != ":" }).dropFirst(2))
                }
            }
        }
        for (entry, value) in given { try entry.apply(&config, &settings, value) }
        guard config.store != .postgres || config.databaseURL != nil else {
            throw Invalid(description: "--store postgres needs --database-url or DATABASE_URL (postgresql://user:password@host:port/database)")
        }
        guard config.cors.extraHeaders.isEmpty || config.cors.isEnabled else {
            throw Invalid(description: "--cors-headers: has no effect without --cors-origin")
        }
        return config
    }

    /// The server's options, then the host's, as one list.
    private struct Entry<Settings> {
        let flag: String
        let environment: String?
        let value: String
        let help: String
        let apply: (inout ServerConfiguration, inout Settings, String) throws(Invalid) -> Void
    }

    private static func entries<Settings>(_ extra: [ConfigurationOption<Settings>]) -> [Entry<Settings>] {
        options.map { option in
            Entry(flag: option.flag, environment: option.environment, value: option.value, help: option.help) { config, _, value throws(Invalid) in
                try option.apply(&config, value)
            }
        } + extra.map { option in
            Entry(flag: option.flag, environment: option.environment, value: option.value, help: option.help) { _, settings, value throws(Invalid) in
                try option.apply(&settings, value)
            }
        }
    }

    /// What `parse` fills in when a host has no settings of its own.
    public struct NoSettings: Sendable {}

    /// `--help` with the server's options only.
    public static var help: String { help(adding: [ConfigurationOption<NoSettings>]()) }

    /// What `navd --help` says navd is.
    public static let navdDescription = [
        "navd: a navigation-state server. Hosts feature models per session, takes user actions over",
        "HTTP/JSON and streams present/dismiss/push/pop/state events over server-sent events.",
    ]

    /// `--help` of navd: the server's options, then the host's.
    public static func help<Settings>(adding extra: [ConfigurationOption<Settings>]) -> String {
        help(program: "navd", about: navdDescription, adding: extra)
    }

    /// `--help` of a server named `program` (its executable), described by the lines `about`:
    /// the server's options, then the host's.
    public static func help<Settings>(program: String, about: [String], adding extra: [ConfigurationOption<Settings>]) -> String {
        var lines = about + (about.isEmpty ? [] : [""]) + [
            "usage: \(program) [options]",
            "       \(program) --check-health   (exit 0 if the server on --host/--port answers /healthz)",
            "       \(program) \(OpenAPICommand.usageLine)   (the API document it serves at /openapi.yaml)",
            "       \(program) \(RestoreCommand.usageLine)   (put a backup in place as the store of an empty data directory)",
            "",
            "options (flag, environment variable):",
        ]
        // Each column as wide as its widest entry and a space, a host's options included.
        let rows = entries(extra).map { ("  \($0.flag) \($0.value)", $0.environment ?? "", $0.help) }
            + [("  --version", "", "print the version and exit"), ("  --help", "", "this text")]
        let flagWidth = (rows.map(\.0.count).max() ?? 0) + 1
        let environmentWidth = (rows.map(\.1.count).max() ?? 0) + 1
        for (flag, environment, help) in rows {
            lines.append(flag.padded(to: flagWidth) + environment.padded(to: environmentWidth) + help)
        }
        return lines.joined(separator: "\n")
    }

    /// A whole number in `range`, or `Invalid` naming `flag`: for options of a host's own too.
    public static func integer(_ text: String, _ flag: String, in range: ClosedRange<Int>) throws(Invalid) -> Int {
        guard let value = Int(text.trimmingSpaces), range.contains(value) else {
            throw Invalid(description: "\(flag): \"\(text)\" is not a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }
}

/// One setting: a flag, optionally an environment variable, and how its value is applied.
/// The server's own options are these; a host adds its own for its features' settings.
public struct ConfigurationOption<Settings>: Sendable {
    /// The flag (`--fact-timeout-ms`).
    public let flag: String
    /// The environment variable that sets it too, if any.
    public let environment: String?
    /// The value's placeholder in `--help` (`MS`, `URL`).
    public let value: String
    /// One line for `--help`.
    public let help: String
    let apply: @Sendable (inout Settings, String) throws(ServerConfiguration.Invalid) -> Void

    /// - Parameter apply: checks the text and stores it; a bad value throws `Invalid` naming `flag`.
    public init(flag: String, environment: String?, value: String, help: String,
                apply: @escaping @Sendable (inout Settings, String) throws(ServerConfiguration.Invalid) -> Void) {
        self.flag = flag
        self.environment = environment
        self.value = value
        self.help = help
        self.apply = apply
    }
}

private extension Array where Element == String {
    var pair: (String, String?) { (first ?? "", count > 1 ? self[1] : nil) }
}
