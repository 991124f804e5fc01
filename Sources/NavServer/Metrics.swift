import NavigationCore
import Synchronization

/// Counters and latency histograms, exposed in the Prometheus text format (version 0.0.4).
///
/// Requests carry `route` (a path template, so ids never become labels), `method` and `code`
/// (the status). Requests with `?wait=true` are counted with every other request but timed in a
/// histogram of their own, `navd_http_wait_request_duration_seconds`: their latency is mostly
/// the effect they wait for (a fetch, a timer), seconds rather than milliseconds, and mixed in it
/// would hide the latency of everything else. Its buckets reach the 60 s a wait may last.
public final class Metrics: Sendable {
    /// One series of request metrics. Every part is an index into a fixed list, so labels stay
    /// bounded whatever clients send, and counting a known series allocates nothing.
    private struct Series: Hashable, Comparable {
        var route: UInt8
        var method: UInt8
        var code: UInt16

        static func < (a: Series, b: Series) -> Bool {
            (a.route, a.method, a.code) < (b.route, b.method, b.code)
        }
    }

    private struct Histogram {
        var buckets: [Int]
        var sum = 0.0
        var count = 0

        init(bounds: Int) { buckets = Array(repeating: 0, count: bounds) }

        mutating func observe(_ seconds: Double, bounds: [Double]) {
            // Stored per bucket; the exposition adds them up.
            if let index = bounds.firstIndex(where: { seconds <= $0 }) { buckets[index] += 1 }
            sum += seconds
            count += 1
        }
    }

    private struct Counters {
        var requests: [Series: Int] = [:]
        var durations: [Series: Histogram] = [:]
        var waitDurations: [Series: Histogram] = [:]
        var events: [String: Int] = [:]
        var droppedSubscribers = 0
    }

    static let buckets: [Double] = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
    static let waitBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]
    static let routes: [String] = Route.allCases.map(\.rawValue) + ["unknown"]
    /// Any other method a client sends is counted as `other`; a request refused before its head
    /// was read (a head too large or too slow, over capacity), as `unknown`.
    static let methods = ["GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "other", "unknown"]
    private static let knownMethods = methods.prefix(7)

    private let counters = Mutex(Counters())
    private let openStreams = Atomic<Int>(0)
    private let hosted = Mutex<[LabeledCounter]>([])

    /// Metrics with every counter at zero.
    public init() {}

    func requestFinished(route: Route?, method: String?, status: Int, seconds: Double, waited: Bool = false) {
        let series = Self.series(route: route, method: method, status: status)
        counters.withLock { counters in
            counters.requests[series, default: 0] += 1
            if waited {
                counters.waitDurations[series, default: Histogram(bounds: Self.waitBuckets.count)].observe(seconds, bounds: Self.waitBuckets)
            } else {
                counters.durations[series, default: Histogram(bounds: Self.buckets.count)].observe(seconds, bounds: Self.buckets)
            }
        }
    }

    /// A request the HTTP layer refused on its own: counted, not timed (it took no work).
    func requestRefused(route: Route?, method: String?, status: Int) {
        let series = Self.series(route: route, method: method, status: status)
        counters.withLock { $0.requests[series, default: 0] += 1 }
    }

    private static func series(route: Route?, method: String?, status: Int) -> Series {
        let routeIndex = route.flatMap { Route.allCases.firstIndex(of: $0) } ?? routes.count - 1
        let methodIndex = method.map { knownMethods.firstIndex(of: $0) ?? knownMethods.count } ?? methods.count - 1
        return Series(route: UInt8(routeIndex), method: UInt8(methodIndex), code: UInt16(min(max(status, 100), 599)))
    }

    func eventEmitted(_ type: String) {
        counters.withLock { $0.events[type, default: 0] += 1 }
    }

    /// The counter families the hosted features asked for, in the order they asked.
    func counter(_ name: String, help: String, label: String) -> LabeledCounter {
        hosted.withLock { families in
            if let existing = families.first(where: { $0.name == name }) { return existing }
            let counter = LabeledCounter(name: name, help: help, label: label)
            families.append(counter)
            return counter
        }
    }

    func subscriberDropped() {
        counters.withLock { $0.droppedSubscribers += 1 }
    }

    func streamOpened() { openStreams.add(1, ordering: .relaxed) }
    func streamClosed() { openStreams.subtract(1, ordering: .relaxed) }

    /// The exposition, with the gauges read at the moment of the scrape.
    func render(sessionsOpen: Int, memory: MemoryBudget?) -> String {
        let counters = counters.withLock { $0 }
        var out = PrometheusExposition()
        func labels(_ series: Series) -> String {
            #"route="\#(Self.routes[Int(series.route)])",method="\#(Self.methods[Int(series.method)])",code="\#(series.code)""#
        }
        func histogram(_ name: String, _ histograms: [Series: Histogram], bounds: [Double]) {
            for (series, histogram) in histograms.sorted(by: { $0.key < $1.key }) {
                var cumulative = 0
                let counts = histogram.buckets.prefix(bounds.count).map { count in
                    cumulative += count
                    return cumulative
                }
                out.histogram(name, labels: labels(series), bounds: bounds, cumulativeCounts: counts, sum: histogram.sum, count: histogram.count)
            }
        }
        out.family("navd_build_info", "gauge", "navd's version, as a label; always 1.")
        out.sample("navd_build_info", labels: "version=\"\(BuildInfo.version)\"", 1)
        out.family("navd_http_requests_total", "counter", "HTTP requests answered, by route, method and status code.")
        for (series, value) in counters.requests.sorted(by: { $0.key < $1.key }) {
            out.sample("navd_http_requests_total", labels: labels(series), value)
        }
        out.family("navd_http_request_duration_seconds", "histogram",
                   "Time from a complete request to its response (event streams: to their headers), without ?wait=true requests.")
        histogram("navd_http_request_duration_seconds", counters.durations, bounds: Self.buckets)
        out.family("navd_http_wait_request_duration_seconds", "histogram",
                   "Time from a complete ?wait=true request to its response, the effects it waits for included.")
        histogram("navd_http_wait_request_duration_seconds", counters.waitDurations, bounds: Self.waitBuckets)
        out.family("navd_sessions_open", "gauge", "Sessions currently hosted.")
        out.sample("navd_sessions_open", sessionsOpen)
        if let memory {
            out.family("navd_session_memory_bytes", "gauge", "What the sessions hold together, as their memory budget counts it: state as JSON, kept events, a share per feature on screen and per session.")
            out.sample("navd_session_memory_bytes", memory.bytesInUse)
            out.family("navd_session_memory_limit_bytes", "gauge", "The sessions' memory budget (--max-session-memory): past it no session is made, and sessions grow by small steps at most.")
            out.sample("navd_session_memory_limit_bytes", memory.limit)
        }
        out.family("navd_event_streams_open", "gauge", "Event-stream connections currently open.")
        out.sample("navd_event_streams_open", openStreams.load(ordering: .relaxed))
        out.family("navd_events_emitted_total", "counter", "Navigation events emitted, by type.")
        for (type, value) in counters.events.sorted(by: { $0.key < $1.key }) {
            out.sample("navd_events_emitted_total", labels: "type=\"\(type)\"", value)
        }
        out.family("navd_event_stream_subscribers_dropped_total", "counter", "Event streams closed for falling too far behind.")
        out.sample("navd_event_stream_subscribers_dropped_total", counters.droppedSubscribers)
        for counter in hosted.withLock({ $0 }) { counter.render(into: &out) }
        ProcessMetrics.render(into: &out)
        return out.text
    }
}
