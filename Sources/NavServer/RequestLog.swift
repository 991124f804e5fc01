import Dispatch
import NavigationCore
import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// navd's log: one JSON object a line on stdout, each starting with `time` (RFC 3339, UTC,
/// milliseconds), `level` and `event`. Requests (`request`) and closed event streams
/// (`stream_closed`) are logged when `--log-requests` is on; operational events (`listening`,
/// `recovered`, `stopped`…) always. Bodies are never logged, nor credentials: the query a
/// request line is given has them taken out (`Exchange`).
///
/// Lines only append to a buffer; a queue of its own writes it out, so a stalled stdout never
/// blocks a socket loop, and no write waits long on it, so it never holds up a shutdown either.
/// Past `limit` unwritten bytes, request lines are dropped and counted rather than held. A line
/// stdout took only part of (a full disk) is finished before anything else is written: lines are
/// lost whole or not at all, never torn.
final class RequestLog: Sendable {
    enum Level: String, Sendable {
        case info, warn, error
    }

    /// Where finished lines go: stdout, or a test's buffer. Takes what it can until the
    /// deadline it is given (asked again as it waits: a stop can bring it closer).
    typealias Output = @Sendable (_ bytes: ArraySlice<UInt8>, _ deadline: @escaping @Sendable () -> ContinuousClock.Instant) -> StandardStream.Written

    /// What one answered request leaves in the log.
    struct Request {
        var id: String
        var remote: String
        /// Nil (and left out of the line) for a request refused before its head was read.
        var method: String?
        /// As sent, still percent-encoded.
        var path: String?
        var query: [(name: String, value: String)]
        /// How many parameters the query had that `query` leaves out (names navd does not read,
        /// credentials): counted, never shown, so a misspelt `wait` can be told from none.
        var ignoredParameters = 0
        /// What the answer adds (`APIError.logged`), after the path.
        var details: [(name: String, value: String)] = []
        var status: Int
        /// Body bytes sent: 0 for `HEAD`, and for an event stream (its `stream_closed` line counts them).
        var bytes: Int
        var seconds: Double
    }

    /// What one event stream did, logged when it closes.
    struct Stream {
        var requestID: String
        var remote: String
        var session: String
        /// Why it closed: `client_closed`, `too_slow`, `session_ended`, `shutdown` or `server_closed`.
        var reason: String
        var seconds: Double
        var events: Int
        var bytes: Int
    }

    private struct Pending {
        var bytes: [UInt8] = []
        /// Bytes the writer has taken and stdout not yet: they count toward `limit` too.
        var held = 0
        var dropped = 0
        /// `2026-11-23T10:00:00` for the current second, formatted once per second.
        var second = Int.min
        var secondText: [UInt8] = []
    }

    private let buffer = Mutex(Pending())
    /// What the writer took and stdout has not taken yet (from `offset` on), written before
    /// anything newer; one writer at a time, so lines from a flush and a note never interleave.
    private let writing = Mutex<(taken: [UInt8], offset: Int)>(([], 0))
    private let enabled: Bool
    private let output: Output
    private let limit = 4 << 20

    init(enabled: Bool, output: @escaping Output = RequestLog.standardOutput) {
        self.enabled = enabled
        self.output = output
    }

    var logsRequests: Bool { enabled }

    func record(_ request: Request) {
        guard enabled else { return }
        var fields: [(String, JSON)] = [("request_id", .string(request.id)), ("remote", .string(request.remote))]
        if let method = request.method { fields.append(("method", .string(method))) }
        if let path = request.path {
            // The query encoded again, as a client would send it (it was decoded to take out its
            // credentials): decoded, `?a%26b%3Dc=1` would read as two parameters.
            var target = path
            if !request.query.isEmpty {
                target += "?" + request.query.map { Self.percentEncoded($0.name) + "=" + Self.percentEncoded($0.value) }.joined(separator: "&")
            }
            fields.append(("path", .string(target)))
        }
        if request.ignoredParameters > 0 { fields.append(("query_ignored", .int(request.ignoredParameters))) }
        for (name, value) in request.details { fields.append((name, .string(value))) }
        fields += [
            ("status", .int(request.status)),
            ("bytes", .int(request.bytes)),
            ("duration_ms", Self.milliseconds(request.seconds)),
        ]
        append(Self.level(ofStatus: request.status), "request", fields)
    }

    /// `error` for a 500, navd's own fault; `warn` for the other 5xx, refusals it chose (a
    /// protocol it does not speak, over capacity, stopping, a store that fails, whose outage
    /// its own line reports at `error` once): a client must not be able to write error lines
    /// at will.
    static func level(ofStatus status: Int) -> Level {
        switch status {
        case 500: .error
        case 501...: .warn
        default: .info
        }
    }

    func streamClosed(_ stream: Stream) {
        guard enabled else { return }
        append(stream.reason == "too_slow" ? .warn : .info, "stream_closed", [
            ("request_id", .string(stream.requestID)),
            ("remote", .string(stream.remote)),
            ("session", .string(stream.session)),
            ("reason", .string(stream.reason)),
            ("duration_ms", Self.milliseconds(stream.seconds)),
            ("events", .int(stream.events)),
            ("bytes", .int(stream.bytes)),
        ])
    }

    /// An operational event (listening, sessions recovered, a record skipped, stopped): always
    /// logged, whether requests are or not, and written out at once, after any lines before it:
    /// on the writer's queue, so that whoever notes it (the store's writer) never waits on
    /// stdout; once the writer has stopped, in place, for a moment at most.
    func note(_ level: Level, _ event: String, _ fields: [(String, JSON)] = []) {
        append(level, event, fields, always: true)
        if stopped.load(ordering: .acquiring) {
            flush(by: .now + Self.lastWait)
        } else if noteFlushQueued.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged {
            // One queued at a time: each waits for stdout, and a stop waits for what is queued.
            writerQueue.async {
                self.noteFlushQueued.store(false, ordering: .releasing)
                self.flush(by: .now + Self.writeWait)
            }
        }
    }

    private func append(_ level: Level, _ event: String, _ fields: [(String, JSON)], always: Bool = false) {
        buffer.withLock { pending in
            guard always || pending.bytes.count + pending.held < limit else {
                pending.dropped += 1
                return
            }
            Self.appendLine(level, event, fields, to: &pending)
        }
    }

    /// One line, stamped now, at the end of `pending`.
    private static func appendLine(_ level: Level, _ event: String, _ fields: [(String, JSON)], to pending: inout Pending) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let second = Int(now.tv_sec)
        if pending.second != second {
            pending.second = second
            pending.secondText = Array(dateAndTime(second).utf8)
        }
        pending.bytes.append(contentsOf: #"{"time":""#.utf8)
        pending.bytes.append(contentsOf: pending.secondText)
        appendMilliseconds(Int(now.tv_nsec / 1_000_000), to: &pending.bytes)
        pending.bytes.append(contentsOf: #"","level":""#.utf8)
        pending.bytes.append(contentsOf: level.rawValue.utf8)
        pending.bytes.append(contentsOf: #"","event":"#.utf8)
        JSONWriter.writeString(event, into: &pending.bytes)
        for (name, value) in fields {
            pending.bytes.append(UInt8(ascii: ","))
            JSONWriter.writeString(name, into: &pending.bytes)
            pending.bytes.append(UInt8(ascii: ":"))
            JSONWriter.write(value, into: &pending.bytes)
        }
        pending.bytes.append(contentsOf: "}\n".utf8)
    }

    /// Writes the buffer out every 200 ms on a queue of its own, until `stopWriting()`: a server
    /// that stops (an embedder may start and stop several) leaves no timer or thread behind.
    func startWriting() {
        guard enabled else { return }
        let timer = DispatchSource.makeTimerSource(queue: writerQueue)
        // The handler holds its timer until it cancels it, which lets go of both.
        timer.setEventHandler { [weak self, timer] in
            guard let self, !self.stopped.load(ordering: .acquiring) else { return timer.cancel() }
            self.flush(by: .now + Self.writeWait)
        }
        timer.schedule(deadline: .now() + Self.writeInterval, repeating: Self.writeInterval, leeway: .milliseconds(20))
        timer.resume()
    }

    /// Stops the writer and writes out what is left, waiting `lastWait` at most for stdout, a
    /// write under way included (its deadline comes forward to the stop's). Once it returns, the
    /// timer writes no more (a tick under way has finished; the next cancels the timer).
    func stopWriting() {
        let deadline = ContinuousClock.now + Self.lastWait
        stopDeadline.withLock { $0 = deadline }
        stopped.store(true, ordering: .releasing)
        writerQueue.sync {}
        flush(by: deadline)
    }

    private static let writeInterval: DispatchTimeInterval = .milliseconds(200)
    /// How long one write may wait for stdout to take lines; what it did not take waits for the
    /// next, in the buffer (and counts toward `limit`).
    private static let writeWait: Duration = .milliseconds(250)
    /// How long the last writes, as the server stops, may wait, a write under way included: a
    /// stdout nobody reads must not make a clean stop overrun its deadline.
    private static let lastWait: Duration = .milliseconds(200)
    /// Set by `stopWriting()`: no write waits past it, whenever it began.
    private let stopDeadline = Mutex<ContinuousClock.Instant?>(nil)
    private let writerQueue = DispatchQueue(label: "navd.log")
    private let stopped = Atomic(false)
    private let noteFlushQueued = Atomic(false)

    /// Writes out what is buffered, waiting for stdout until `deadline` at most (or the stop's,
    /// if sooner). What stdout did not take is kept, and written before anything newer, unless
    /// stdout is gone for good; while kept, it counts toward `limit`.
    func flush(by deadline: ContinuousClock.Instant) {
        let until: @Sendable () -> ContinuousClock.Instant = { [self] in stopDeadline.withLock { $0 }.map { min($0, deadline) } ?? deadline }
        writing.withLock { writer in
            while true {
                if writer.offset == writer.taken.count {
                    writer.taken = take()
                    writer.offset = 0
                    if writer.taken.isEmpty { return }
                }
                let written = output(writer.taken[writer.offset...], until)
                writer.offset = written.isClosed ? writer.taken.count : writer.offset + written.count
                let left = writer.taken.count - writer.offset
                buffer.withLock { $0.held = left }
                if left > 0 { return }
            }
        }
    }

    /// The lines buffered, with a count of those dropped before them, as `held` from now on.
    private func take() -> [UInt8] {
        buffer.withLock { pending in
            if pending.dropped > 0 {
                let dropped = pending.dropped
                pending.dropped = 0
                Self.appendLine(.warn, "log_lines_dropped", [("count", .int(dropped))], to: &pending)
            }
            defer { pending.bytes = [] }
            pending.held = pending.bytes.count
            return pending.bytes
        }
    }

    /// Writes to stdout. A closed stdout loses the lines, nothing else; one that fails for now (a
    /// full disk) or falls behind keeps them for the next write, within the buffer's bound.
    static let standardOutput: Output = { bytes, deadline in StandardStream.output.write(bytes, until: deadline) }

    /// Takes every line and keeps none: a server whose log nobody reads (a test's).
    static let discarding: Output = { bytes, _ in StandardStream.Written(count: bytes.count, isClosed: false) }

    /// `text` with every byte but the unreserved ones and `/:@!$'()*,` percent-encoded.
    static func percentEncoded(_ text: String) -> String {
        guard !text.utf8.allSatisfy({ keptInTarget[Int($0)] }) else { return text }
        let digits = Array("0123456789ABCDEF".utf8)
        var bytes: [UInt8] = []
        for byte in text.utf8 {
            if keptInTarget[Int(byte)] {
                bytes.append(byte)
            } else {
                bytes += [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]]
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private static let keptInTarget: [Bool] = {
        var kept = [Bool](repeating: false, count: 256)
        for byte in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~/:@!$'()*,".utf8 { kept[Int(byte)] = true }
        return kept
    }()

    /// Milliseconds with microsecond precision.
    private static func milliseconds(_ seconds: Double) -> JSON {
        .double((seconds * 1_000_000).rounded() / 1000)
    }

    /// `2026-11-23T10:00:00.123Z`: RFC 3339, UTC, milliseconds.
    static func rfc3339(seconds: Int, milliseconds: Int) -> String {
        var bytes = Array(dateAndTime(seconds).utf8)
        appendMilliseconds(milliseconds, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `2026-11-23T10:00:00`, without a formatter object on the request path.
    private static func dateAndTime(_ seconds: Int) -> String {
        var clock = time_t(seconds)
        var parts = tm()
        gmtime_r(&clock, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
    }

    /// `.123Z`
    private static func appendMilliseconds(_ value: Int, to bytes: inout [UInt8]) {
        let value = min(max(value, 0), 999)
        bytes.append(UInt8(ascii: "."))
        bytes.append(UInt8(ascii: "0") + UInt8(value / 100))
        bytes.append(UInt8(ascii: "0") + UInt8(value / 10 % 10))
        bytes.append(UInt8(ascii: "0") + UInt8(value % 10))
        bytes.append(UInt8(ascii: "Z"))
    }
}
