import Features
import HTTP
import NavigationCore

/// Every setting of `navd`: a flag, and for the ones a container sets, an environment variable.
/// Flags win over the environment, the environment over defaults.
public struct ServerConfiguration: Sendable, Equatable {
    public var host = "127.0.0.1"
    public var port = 8080
    public var factBaseURL = FactServiceURL.numbersAPI
    /// A deadline for the whole fetch, connecting to last byte.
    public var factTimeout: Duration = .seconds(5)
    /// Fact fetches in flight, all sessions together and in one session.
    public var factMaxInFlight = 64
    public var factMaxPerSession = 2
    public var connectDelay: Duration = .seconds(1)
    public var alertDismissDelay: Duration = .seconds(3)
    public var maxSessions: Int?
    public var maxConnections: Int?
    /// Events kept for resuming, and how large a session's state may grow.
    public var sessionLimits = SessionLimits()
    /// Sessions nobody touched (no request, no open stream) for this long are ended.
    public var idleSessionTTL: Duration? = .seconds(3600)
    /// Browser pages allowed to call (`--cors-origin`, `--cors-headers`).
    public var cors = CORSPolicy()
    public var heartbeatInterval: Duration = .seconds(15)
    public var waitTimeout: Duration = .seconds(10)
    /// After SIGTERM, how long `/readyz` answers 503 while everything is still served, so load
    /// balancers stop sending work before the drain.
    public var shutdownGrace: Duration = .zero
    /// `--check-health`: ask a running server's `/healthz` and exit, for container health checks.
    public var checkHealth = false
    public var logRequests = true
    /// How long a client may take to send a request's head (a slow-loris defence); not a flag.
    public var headerTimeout: Duration = .seconds(10)
    /// Where sessions live between processes.
    public var store: StoreKind = .sqlite
    /// The SQLite store's directory.
    public var dataDirectory = "navd-data"

    /// The session store engines.
    public enum StoreKind: String, Sendable, CaseIterable {
        /// An embedded SQLite database in the data directory: sessions survive restarts.
        case sqlite
        /// Nothing on disk: a restart ends every session.
        case memory
    }

    public init() {}

    /// A setting that cannot be used; `navd` prints it and exits with code 2.
    public struct Invalid: Error, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// What `--help` asks for.
    public struct HelpRequested: Error {}

    /// What `--version` asks for.
    public struct VersionRequested: Error {}

    private struct Option: Sendable {
        let flag: String
        let environment: String?
        let value: String
        let help: String
        let apply: @Sendable (inout ServerConfiguration, String) throws(Invalid) -> Void
    }

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
        Option(flag: "--fact-base-url", environment: "FACT_BASE_URL", value: "URL", help: "fact service; GET {url}/{n} (default http://numbersapi.com)") { config, value throws(Invalid) in
            guard let url = FactServiceURL(value) else {
                throw Invalid(description: "--fact-base-url: \"\(value)\" is not an http(s) URL")
            }
            config.factBaseURL = url
        },
        Option(flag: "--fact-timeout-ms", environment: "FACT_TIMEOUT_MS", value: "MS", help: "deadline for a whole fact fetch (default 5000)") { config, value throws(Invalid) in
            config.factTimeout = .milliseconds(try integer(value, "--fact-timeout-ms", in: 1...600_000))
        },
        Option(flag: "--fact-max-in-flight", environment: "FACT_MAX_IN_FLIGHT", value: "N", help: "fact fetches running at once, all sessions (default 64)") { config, value throws(Invalid) in
            config.factMaxInFlight = try integer(value, "--fact-max-in-flight", in: 1...100_000)
        },
        Option(flag: "--fact-max-per-session", environment: "FACT_MAX_PER_SESSION", value: "N", help: "fact fetches running at once in one session (default 2)") { config, value throws(Invalid) in
            config.factMaxPerSession = try integer(value, "--fact-max-per-session", in: 1...100_000)
        },
        Option(flag: "--connect-delay-ms", environment: "CONNECT_DELAY_MS", value: "MS", help: "how long joining a Wi-Fi network takes (default 1000)") { config, value throws(Invalid) in
            config.connectDelay = .milliseconds(try integer(value, "--connect-delay-ms", in: 0...600_000))
        },
        Option(flag: "--alert-dismiss-ms", environment: "ALERT_DISMISS_MS", value: "MS", help: "how long the gallery's self-dismissing alert stays (default 3000)") { config, value throws(Invalid) in
            config.alertDismissDelay = .milliseconds(try integer(value, "--alert-dismiss-ms", in: 0...600_000))
        },
        Option(flag: "--max-sessions", environment: "NAVD_MAX_SESSIONS", value: "N", help: "sessions at most; more are refused with 503 (default unlimited)") { config, value throws(Invalid) in
            config.maxSessions = try integer(value, "--max-sessions", in: 1...100_000_000)
        },
        Option(flag: "--max-connections", environment: "NAVD_MAX_CONNECTIONS", value: "N", help: "open connections at most; more get 503 and are closed (default unlimited)") { config, value throws(Invalid) in
            config.maxConnections = try integer(value, "--max-connections", in: 1...10_000_000)
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
        Option(flag: "--idle-session-ttl", environment: "NAVD_IDLE_SESSION_TTL", value: "SECONDS", help: "end sessions idle this long, 0 = never (default 3600)") { config, value throws(Invalid) in
            let seconds = try integer(value, "--idle-session-ttl", in: 0...31_536_000)
            config.idleSessionTTL = seconds == 0 ? nil : .seconds(seconds)
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
        Option(flag: "--store", environment: "NAVD_STORE", value: "sqlite|memory", help: "where sessions live between restarts (default sqlite)") { config, value throws(Invalid) in
            guard let kind = StoreKind(rawValue: value) else { throw Invalid(description: "--store: \"\(value)\" is neither sqlite nor memory") }
            config.store = kind
        },
        Option(flag: "--data-dir", environment: "NAVD_DATA_DIR", value: "PATH", help: "the SQLite store's directory (default ./navd-data)") { config, value throws(Invalid) in
            guard !value.isEmpty else { throw Invalid(description: "--data-dir: must not be empty") }
            config.dataDirectory = value
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
        var config = ServerConfiguration()
        for option in options {
            if let name = option.environment, let value = environment[name] {
                do { try option.apply(&config, value) } catch {
                    throw Invalid(description: "\(name): " + error.description.drop(while: { $0 != ":" }).dropFirst(2))
                }
            }
        }
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
            guard let option = options.first(where: { $0.flag == flag }) else {
                throw Invalid(description: "unknown option \(argument); see navd --help")
            }
            let value: String
            if let inline {
                value = inline
            } else {
                guard index < arguments.count else { throw Invalid(description: "\(flag) needs a value (\(option.value))") }
                value = arguments[index]
                index += 1
            }
            try option.apply(&config, value)
        }
        guard config.cors.extraHeaders.isEmpty || config.cors.isEnabled else {
            throw Invalid(description: "--cors-headers: has no effect without --cors-origin")
        }
        return config
    }

    public static var help: String {
        var lines = [
            "navd: a navigation-state server. Hosts feature models per session, takes user actions over",
            "HTTP/JSON and streams present/dismiss/push/pop/state events over server-sent events.",
            "",
            "usage: navd [options]",
            "       navd --check-health   (exit 0 if the server on --host/--port answers /healthz)",
            "",
            "options (flag, environment variable):",
        ]
        for option in options {
            let flag = "  \(option.flag) \(option.value)".padded(to: 30)
            let environment = (option.environment ?? "").padded(to: 22)
            lines.append("\(flag)\(environment)\(option.help)")
        }
        lines.append("  --version                                         print the version and exit")
        lines.append("  --help                                            this text")
        return lines.joined(separator: "\n")
    }

    private static func integer(_ text: String, _ flag: String, in range: ClosedRange<Int>) throws(Invalid) -> Int {
        guard let value = Int(text.trimmingSpaces), range.contains(value) else {
            throw Invalid(description: "\(flag): \"\(text)\" is not a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return value
    }
}

private extension Array where Element == String {
    var pair: (String, String?) { (first ?? "", count > 1 ? self[1] : nil) }
}
