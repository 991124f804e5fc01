/// Prometheus' text exposition format (0.0.4), written a family at a time: every part of
/// `/metrics` (requests, the store, the process) writes HELP, TYPE, samples and histograms one
/// way, which is what `promtool check metrics` holds them to.
struct PrometheusExposition {
    private(set) var text = ""

    mutating func family(_ name: String, _ type: String, _ help: String) {
        text += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
    }

    /// One sample; `labels` as written between the braces (`route="actions",code="200"`).
    mutating func sample(_ name: String, labels: String = "", _ value: some CustomStringConvertible) {
        text += labels.isEmpty ? "\(name) \(value)\n" : "\(name){\(labels)} \(value)\n"
    }

    /// One histogram series. `cumulativeCounts[i]` counts the observations up to `bounds[i]`.
    mutating func histogram(_ name: String, labels: String = "", bounds: [some CustomStringConvertible],
                            cumulativeCounts: [Int], sum: Double, count: Int) {
        let prefix = labels.isEmpty ? "" : labels + ","
        for (bound, cumulative) in zip(bounds, cumulativeCounts) {
            text += "\(name)_bucket{\(prefix)le=\"\(bound)\"} \(cumulative)\n"
        }
        text += "\(name)_bucket{\(prefix)le=\"+Inf\"} \(count)\n"
        sample("\(name)_sum", labels: labels, sum)
        sample("\(name)_count", labels: labels, count)
    }
}
