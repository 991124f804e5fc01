@testable import NavServer
import Testing

@Suite struct RequestLogTests {
    @Test func timestampsAreISO8601InUTC() {
        #expect(RequestLog.iso8601(0) == "1970-01-01T00:00:00Z")
        #expect(RequestLog.iso8601(1_795_330_986) == "2026-11-22T07:03:06Z")
    }
}
