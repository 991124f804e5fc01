import Foundation
import NavigationCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One JSON line per request on stdout: method, path (never a token), status and duration.
/// Bodies and tokens are never logged. Lines are buffered and written in batches, so logging
/// costs no system call per request.
final class RequestLog: Sendable {
    private struct Pending {
        var bytes: [UInt8] = []
        /// The ISO 8601 time of the current second, formatted once per second.
        var second = 0
        var timestamp = ""
    }

    private let buffer = Mutex(Pending())
    private let enabled: Bool

    init(enabled: Bool) {
        self.enabled = enabled
    }

    func record(method: String, path: String, query: [(name: String, value: String)], status: Int, seconds: Double) {
        guard enabled else { return }
        var target = path
        let kept = query.filter { $0.name != "token" }
        if !kept.isEmpty {
            target += "?" + kept.map { "\($0.name)=\($0.value)" }.joined(separator: "&")
        }
        let now = time(nil)
        let flushNow = buffer.withLock { pending in
            if pending.second != now {
                pending.second = now
                pending.timestamp = Self.iso8601(now)
            }
            let line = JSON.object(JSONObject([
                ("time", .string(pending.timestamp)),
                ("method", .string(method)),
                ("path", .string(target)),
                ("status", .int(status)),
                ("duration_ms", .double((seconds * 1_000_000).rounded() / 1000)),
            ]))
            JSONWriter.write(line, into: &pending.bytes)
            pending.bytes.append(0x0A)
            return pending.bytes.count > 64 * 1024
        }
        if flushNow { flush() }
    }

    func flush() {
        let pending = buffer.withLock { pending in
            defer { pending.bytes.removeAll(keepingCapacity: true) }
            return pending.bytes
        }
        guard !pending.isEmpty else { return }
        FileHandle.standardOutput.write(Data(pending))
    }

    /// `2026-11-22T05:03:06Z`, without a formatter object on the request path.
    static func iso8601(_ seconds: Int) -> String {
        var clock = time_t(seconds)
        var parts = tm()
        gmtime_r(&clock, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
    }
}
