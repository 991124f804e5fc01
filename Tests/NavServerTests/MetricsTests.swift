@testable import NavServer
import Testing

@Suite struct MetricsTests {
    @Test func histogramBucketsAreCumulativeAndRequestsCountByStatusClass() {
        let metrics = Metrics()
        metrics.requestFinished(route: .actions, status: 200, seconds: 0.0007)
        metrics.requestFinished(route: .actions, status: 422, seconds: 0.3)
        metrics.requestFinished(route: nil, status: 404, seconds: 0.00001)
        let text = metrics.render(sessionsOpen: 0)
        for line in [
            #"navd_http_requests_total{route="actions",status="2xx"} 1"#,
            #"navd_http_requests_total{route="actions",status="4xx"} 1"#,
            #"navd_http_requests_total{route="unknown",status="4xx"} 1"#,
            #"navd_http_request_duration_seconds_bucket{route="actions",le="0.0005"} 0"#,
            #"navd_http_request_duration_seconds_bucket{route="actions",le="0.001"} 1"#,
            #"navd_http_request_duration_seconds_bucket{route="actions",le="0.25"} 1"#,
            #"navd_http_request_duration_seconds_bucket{route="actions",le="0.5"} 2"#,
            #"navd_http_request_duration_seconds_bucket{route="actions",le="+Inf"} 2"#,
            #"navd_http_request_duration_seconds_count{route="actions"} 2"#,
        ] {
            #expect(text.contains(line + "\n"), "missing: \(line)")
        }
        #expect(!text.contains(#"route="healthz""#), "routes without traffic are left out")
    }
}
