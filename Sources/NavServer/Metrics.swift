import Synchronization

/// Counters and a latency histogram, exposed in the Prometheus text format (version 0.0.4).
public final class Metrics: Sendable {
    /// Requests are counted in fixed slots (route × status class), so counting one allocates
    /// nothing; routes are `Route`'s cases, plus one for paths the API does not have.
    private struct Counters {
        var requests: [Int]
        var durationBuckets: [Int]
        var durationSum: [Double]
        var durationCount: [Int]
        var events: [String: Int] = [:]
        var factFetches: [String: Int] = [:]
        var droppedSubscribers = 0

        init() {
            requests = Array(repeating: 0, count: Metrics.routes.count * 5)
            durationBuckets = Array(repeating: 0, count: Metrics.routes.count * Metrics.buckets.count)
            durationSum = Array(repeating: 0, count: Metrics.routes.count)
            durationCount = Array(repeating: 0, count: Metrics.routes.count)
        }
    }

    static let buckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    static let routes: [String] = Route.allCases.map(\.rawValue) + ["unknown"]
    private static let statusClasses = ["1xx", "2xx", "3xx", "4xx", "5xx"]

    private let counters = Mutex(Counters())
    private let openStreams = Atomic<Int>(0)

    public init() {}

    func requestFinished(route: Route?, status: Int, seconds: Double) {
        let routeIndex = route.flatMap { Route.allCases.firstIndex(of: $0) } ?? Self.routes.count - 1
        let classIndex = min(max(status / 100, 1), 5) - 1
        let firstBucket = Self.buckets.firstIndex { seconds <= $0 } ?? Self.buckets.count
        counters.withLock { counters in
            counters.requests[routeIndex * 5 + classIndex] += 1
            for bucket in firstBucket..<Self.buckets.count {
                counters.durationBuckets[routeIndex * Self.buckets.count + bucket] += 1
            }
            counters.durationSum[routeIndex] += seconds
            counters.durationCount[routeIndex] += 1
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
        for (routeIndex, route) in Self.routes.enumerated() {
            for (classIndex, statusClass) in Self.statusClasses.enumerated() {
                let value = counters.requests[routeIndex * 5 + classIndex]
                if value > 0 { out += "navd_http_requests_total{route=\"\(route)\",status=\"\(statusClass)\"} \(value)\n" }
            }
        }
        family("navd_http_request_duration_seconds", "histogram", "Time from a complete request to its response, by route.")
        for (routeIndex, route) in Self.routes.enumerated() where counters.durationCount[routeIndex] > 0 {
            for (index, bound) in Self.buckets.enumerated() {
                let value = counters.durationBuckets[routeIndex * Self.buckets.count + index]
                out += "navd_http_request_duration_seconds_bucket{route=\"\(route)\",le=\"\(bound)\"} \(value)\n"
            }
            let count = counters.durationCount[routeIndex]
            out += "navd_http_request_duration_seconds_bucket{route=\"\(route)\",le=\"+Inf\"} \(count)\n"
            out += "navd_http_request_duration_seconds_sum{route=\"\(route)\"} \(counters.durationSum[routeIndex])\n"
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
