import Foundation
import NavigationCore
import Synchronization

/// One JSON line per request on stdout: method, path (never a token), status and duration.
/// Bodies and tokens are never logged. Lines are buffered and written in batches, so logging
/// costs no system call per request.
final class RequestLog: Sendable {
    private let buffer = Mutex<[UInt8]>([])
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
        let line = JSON.object(JSONObject([
            ("time", .string(Date().formatted(.iso8601))),
            ("method", .string(method)),
            ("path", .string(target)),
            ("status", .int(status)),
            ("duration_ms", .double((seconds * 1_000_000).rounded() / 1000)),
        ]))
        let flushNow = buffer.withLock { buffer in
            JSONWriter.write(line, into: &buffer)
            buffer.append(0x0A)
            return buffer.count > 64 * 1024
        }
        if flushNow { flush() }
    }

    func flush() {
        let pending = buffer.withLock { buffer in
            defer { buffer.removeAll(keepingCapacity: true) }
            return buffer
        }
        guard !pending.isEmpty else { return }
        FileHandle.standardOutput.write(Data(pending))
    }
}
