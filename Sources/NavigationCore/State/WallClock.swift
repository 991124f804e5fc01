#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Seconds since 1970 from the system's real-time clock, for times that must outlive the
/// process (a session's creation, a deadline restored after a restart). Read from the system
/// directly, so nothing needs Foundation's `Date`.
public func secondsSince1970() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
}
