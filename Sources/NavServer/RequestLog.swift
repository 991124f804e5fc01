import Foundation
import NavigationCore
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// One JSON line per request on stdout: method, path (never a token), status and duration.
/// Bodies and tokens are never logged. Requests only append to a buffer; a thread of its own
/// writes it out, so a stalled stdout never blocks a socket loop. Past `limit` unwritten bytes,
/// lines are dropped and counted rather than held.
final class RequestLog: Sendable {
    private struct Pending {
        var bytes: [UInt8] = []
        var dropped = 0
        /// The ISO 8601 time of the current second, formatted once per second.
        var second = 0
        var timestamp = ""
    }

    private let buffer = Mutex(Pending())
    private let enabled: Bool
    private let limit = 4 << 20

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
        buffer.withLock { pending in
            guard pending.bytes.count < limit else {
                pending.dropped += 1
                return
            }
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
        }
    }

    /// An operational event (sessions recovered, a record skipped): one JSON line, always
    /// written, whether requests are logged or not.
    func note(_ fields: KeyValuePairs<String, String>) {
        var bytes: [UInt8] = []
        JSONWriter.write(.object(JSONObject(fields.map { ($0.key, .string($0.value)) })), into: &bytes)
        bytes.append(0x0A)
        try? FileHandle.standardOutput.write(contentsOf: Data(bytes))
    }

    /// Writes the buffer out every 200 ms, on a thread of its own.
    func startWriting() {
        guard enabled else { return }
        Thread { [self] in
            while true {
                Thread.sleep(forTimeInterval: 0.2)
                flush()
            }
        }.start()
    }

    func flush() {
        let (bytes, dropped) = buffer.withLock { pending in
            defer {
                pending.bytes.removeAll(keepingCapacity: true)
                pending.dropped = 0
            }
            return (pending.bytes, pending.dropped)
        }
        var out = bytes
        if dropped > 0 { out += Array(#"{"event":"log_lines_dropped","count":\#(dropped)}"#.utf8) + [0x0A] }
        guard !out.isEmpty else { return }
        // A closed stdout must not take the server down: the lines are lost, nothing else.
        try? FileHandle.standardOutput.write(contentsOf: Data(out))
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
