import Features
import NavServer

/// The demo features' own settings, as flags and environment variables beside the server's.
public struct DemoSettings: Sendable, Equatable {
    public var factBaseURL = FactServiceURL.numbersAPI
    /// A deadline for the whole fetch, connecting to last byte.
    public var factTimeout: Duration = .seconds(5)
    /// Fact fetches in flight, all sessions together and in one session.
    public var factMaxInFlight = 64
    public var factMaxPerSession = 2
    public var connectDelay: Duration = .seconds(1)
    public var alertDismissDelay: Duration = .seconds(3)

    public init() {}

    public static let options: [ConfigurationOption<DemoSettings>] = [
        ConfigurationOption(flag: "--fact-base-url", environment: "FACT_BASE_URL", value: "URL", help: "fact service; GET {url}/{n} (default http://numbersapi.com)") { settings, value throws(ServerConfiguration.Invalid) in
            guard let url = FactServiceURL(value) else {
                throw ServerConfiguration.Invalid(description: "--fact-base-url: \"\(value)\" is not an http(s) URL")
            }
            settings.factBaseURL = url
        },
        ConfigurationOption(flag: "--fact-timeout-ms", environment: "FACT_TIMEOUT_MS", value: "MS", help: "deadline for a whole fact fetch (default 5000)") { settings, value throws(ServerConfiguration.Invalid) in
            settings.factTimeout = .milliseconds(try ServerConfiguration.integer(value, "--fact-timeout-ms", in: 1...600_000))
        },
        ConfigurationOption(flag: "--fact-max-in-flight", environment: "FACT_MAX_IN_FLIGHT", value: "N", help: "fact fetches running at once, all sessions (default 64)") { settings, value throws(ServerConfiguration.Invalid) in
            settings.factMaxInFlight = try ServerConfiguration.integer(value, "--fact-max-in-flight", in: 1...100_000)
        },
        ConfigurationOption(flag: "--fact-max-per-session", environment: "FACT_MAX_PER_SESSION", value: "N", help: "fact fetches running at once in one session (default 2)") { settings, value throws(ServerConfiguration.Invalid) in
            settings.factMaxPerSession = try ServerConfiguration.integer(value, "--fact-max-per-session", in: 1...100_000)
        },
        ConfigurationOption(flag: "--connect-delay-ms", environment: "CONNECT_DELAY_MS", value: "MS", help: "how long joining a Wi-Fi network takes (default 1000)") { settings, value throws(ServerConfiguration.Invalid) in
            settings.connectDelay = .milliseconds(try ServerConfiguration.integer(value, "--connect-delay-ms", in: 0...600_000))
        },
        ConfigurationOption(flag: "--alert-dismiss-ms", environment: "ALERT_DISMISS_MS", value: "MS", help: "how long the gallery's self-dismissing alert stays (default 3000)") { settings, value throws(ServerConfiguration.Invalid) in
            settings.alertDismissDelay = .milliseconds(try ServerConfiguration.integer(value, "--alert-dismiss-ms", in: 0...600_000))
        },
    ]
}
