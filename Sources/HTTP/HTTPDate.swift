#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The `Date` field every response carries (RFC 9110 §6.6.1: a server with a clock sends
/// one), made once a second per loop rather than once per response.
struct HTTPDate {
    private var second = Int.min
    private var field: [UInt8] = []

    /// `Date: <IMF-fixdate>\r\n` for the current second.
    mutating func currentField() -> [UInt8] {
        let now = Int(time(nil))
        if now != second {
            second = now
            field = Array("Date: \(Self.format(now))\r\n".utf8)
        }
        return field
    }

    private static let days = ["Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"]
    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// `seconds` since the epoch as an IMF-fixdate, e.g. `Sun, 06 Nov 1994 08:49:37 GMT`.
    static func format(_ seconds: Int) -> String {
        var clock = time_t(seconds)
        var parts = tm()
        gmtime_r(&clock, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(days[Int(parts.tm_wday)]), \(two(parts.tm_mday)) \(months[Int(parts.tm_mon)]) \(parts.tm_year + 1900) "
            + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec)) GMT"
    }
}
