import Synchronization

/// Counters and a latency histogram, exposed in the Prometheus text format (version 0.0.4).
public final class Metrics: Sendable {
    private struct Counters {
        var requests: [String: Int] = [:]          // "route|2xx"
        var durationBuckets: [String: [Int]] = [:]  // route -> cumulative counts per bucket
        var durationSum: [String: Double] = [:]
        var durationCount: [String: Int] = [:]
        var events: [String: Int] = [:]
        var factFetches: [String: Int] = [:]
        var droppedSubscribers = 0
    }

    static let buckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    private let counters = Mutex(Counters())
    private let openStreams = Atomic<Int>(0)

    public init() {}

    func requestFinished(route: String, status: Int, seconds: Double) {
        let statusClass = "\(status / 100)xx"
        counters.withLock { counters in
            counters.requests["\(route)|\(statusClass)", default: 0] += 1
            var buckets = counters.durationBuckets[route] ?? Array(repeating: 0, count: Self.buckets.count)
            for (index, bound) in Self.buckets.enumerated() where seconds <= bound { buckets[index] += 1 }
            counters.durationBuckets[route] = buckets
            counters.durationSum[route, default: 0] += seconds
            counters.durationCount[route, default: 0] += 1
        }
    }

    func eventEmitted(_ type: String) {
        counters.withLock { $0.events[type, default: 0] += 1 }
    }

    func factFetched(_ outcome: String) {
        counters.withLock { $0.factFetches[outcome, default: 0] += 1 }
    }

    func subscriberDropped() {
        counters.withLock { $0.droppedSubscribers += 1 }
    }

    func streamOpened() { openStreams.add(1, ordering: .relaxed) }
    func streamClosed() { openStreams.subtract(1, ordering: .relaxed) }

    /// The exposition, with the gauges read at the moment of the scrape.
    func render(sessionsOpen: Int) -> String {
        let counters = counters.withLock { $0 }
        var out = ""
        func family(_ name: String, _ type: String, _ help: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(type)\n"
        }
        family("navd_http_requests_total", "counter", "HTTP requests answered, by route and status class.")
        for (key, value) in counters.requests.sorted(by: { $0.key < $1.key }) {
            let parts = key.split(separator: "|")
            out += "navd_http_requests_total{route=\"\(parts[0])\",status=\"\(parts.count > 1 ? parts[1] : "")\"} \(value)\n"
        }
        family("navd_http_request_duration_seconds", "histogram", "Time from a complete request to its response, by route.")
        for route in counters.durationBuckets.keys.sorted() {
            let buckets = counters.durationBuckets[route] ?? []
            for (index, bound) in Self.buckets.enumerated() {
                out += "navd_http_request_duration_seconds_bucket{route=\"\(route)\",le=\"\(bound)\"} \(buckets[index])\n"
            }
            let count = counters.durationCount[route] ?? 0
            out += "navd_http_request_duration_seconds_bucket{route=\"\(route)\",le=\"+Inf\"} \(count)\n"
            out += "navd_http_request_duration_seconds_sum{route=\"\(route)\"} \(counters.durationSum[route] ?? 0)\n"
            out += "navd_http_request_duration_seconds_count{route=\"\(route)\"} \(count)\n"
        }
        family("navd_sessions_open", "gauge", "Sessions currently hosted.")
        out += "navd_sessions_open \(sessionsOpen)\n"
        family("navd_event_streams_open", "gauge", "Event-stream connections currently open.")
        out += "navd_event_streams_open \(openStreams.load(ordering: .relaxed))\n"
        family("navd_events_emitted_total", "counter", "Navigation events emitted, by type.")
        for (type, value) in counters.events.sorted(by: { $0.key < $1.key }) {
            out += "navd_events_emitted_total{type=\"\(type)\"} \(value)\n"
        }
        family("navd_event_stream_subscribers_dropped_total", "counter", "Event streams closed for falling too far behind.")
        out += "navd_event_stream_subscribers_dropped_total \(counters.droppedSubscribers)\n"
        family("navd_fact_fetches_total", "counter", "Fact service requests, by outcome.")
        for (outcome, value) in counters.factFetches.sorted(by: { $0.key < $1.key }) {
            out += "navd_fact_fetches_total{outcome=\"\(outcome)\"} \(value)\n"
        }
        return out
    }
}
