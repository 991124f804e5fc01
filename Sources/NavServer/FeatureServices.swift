import Synchronization

/// What a server offers the features it hosts while they are assembled: its configuration and
/// counters on `/metrics`. The catalog is built by the caller, so the server knows no feature.
public struct FeatureServices: Sendable {
    /// The server's configuration, for settings a feature shares with it (limits, timeouts).
    public let configuration: ServerConfiguration
    let metrics: Metrics

    /// A counter family on `/metrics` with one label, e.g. a dependency's outcomes.
    ///
    /// Label values must come from a fixed set (never from what a client sends), so the
    /// exposition stays bounded. Asking twice for one name returns the same counter.
    public func counter(_ name: String, help: String, label: String) -> LabeledCounter {
        metrics.counter(name, help: help, label: label)
    }
}

/// A Prometheus counter family with one label; each label value is a series.
public final class LabeledCounter: Sendable {
    /// The family's name (`navd_fact_fetches_total`).
    public let name: String
    /// Its `# HELP` text.
    public let help: String
    /// Its one label's name (`outcome`).
    public let label: String
    private let values = Mutex<[String: Int]>([:])

    init(name: String, help: String, label: String) {
        self.name = name
        self.help = help
        self.label = label
    }

    /// Adds one to the series `value`.
    public func increment(_ value: String) {
        values.withLock { $0[value, default: 0] += 1 }
    }

    /// `# HELP`, `# TYPE` and the series, sorted by label value.
    func render(into out: inout PrometheusExposition) {
        out.family(name, "counter", help)
        for (value, count) in values.withLock({ $0 }).sorted(by: { $0.key < $1.key }) {
            out.sample(name, labels: "\(label)=\"\(value)\"", count)
        }
    }
}
