#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

extension HTTPServer {
    /// Where to listen and the limits that protect the server from clients.
    public struct Configuration: Sendable {
        /// A numeric IPv4 or IPv6 address, or "localhost".
        public var host: String
        /// 0 picks an ephemeral port; read it from `HTTPServer.port` after `start()`.
        public var port: Int
        /// Event-loop threads; defaults to the number of online cores.
        public var loopCount: Int
        /// Connections beyond this get an immediate 503 (their requests are read and dropped
        /// before the close, so the client sees the 503 rather than a reset) and are closed.
        public var maxConnections: Int?
        public var maxRequestLineBytes: Int
        public var maxHeaderBytes: Int
        public var maxBodyBytes: Int
        /// The whole head must arrive within this (slow-loris guard): else 408 and close.
        public var headerTimeout: Duration
        /// The whole body must arrive within this after the head: else 408 and close.
        public var bodyTimeout: Duration
        /// Keep-alive connections idle this long are closed (event streams are exempt). Also
        /// bounds how long a client may leave a response unread.
        public var idleTimeout: Duration
        /// An event stream with more unsent bytes than this behind the message being written is
        /// closed as `.tooSlow`. One message may be larger (a big snapshot): it is queued whole,
        /// and events may follow it within this limit while the client reads it.
        public var streamBufferLimit: Int
        /// A message larger than `streamBufferLimit` is sent only to a client that reads it: a
        /// stream over its limit whose socket takes nothing for this long is closed as
        /// `.tooSlow`, and what it held is freed. An ordinary answer over that size left unread
        /// is closed after this long too (the idle timeout, if shorter).
        public var streamStallTimeout: Duration
        /// Bytes waiting for clients across every connection (streams' queues, unsent answers;
        /// not what the kernel holds), nil for no bound beyond each connection's. Past it, a
        /// stream whose client takes nothing is closed as `.tooSlow` within two sweeps when more
        /// than a sixteenth of `streamBufferLimit` behind, after `streamStallTimeout` when less,
        /// and an unread answer after `streamStallTimeout`: each connection's bound holds one
        /// slow client, and this holds many. Clients that read are left alone. Counted at each
        /// sweep, so it can be passed for a sweep or two.
        public var maxBufferedOutput: Int?
        /// Bytes of request bodies on all connections together, nil for no bound: those being
        /// received, and those that arrived over several reads or are over 16 KiB until their
        /// requests are answered. Counted as bytes arrive: the body that would take them past it
        /// is refused (503, `ProtocolError.Kind.overCapacity`) and its connection closed, and for
        /// four sweeps after, a body whose client has sent nothing for two sweeps is refused
        /// (408). Each body's own bound (`maxBodyBytes`) holds one slow sender, and this holds
        /// many; senders that keep sending are left alone.
        public var maxBufferedBodies: Int?
        /// The kernel send buffer of every connection (SO_SNDBUF; Linux reserves twice this).
        /// Left alone, Linux grows it to 4 MiB for a client that does not read its answers, on
        /// top of the answers navd holds for it; fixed, what waits for one client stays small.
        public var connectionSendBuffer: Int
        /// The kernel send buffer of a connection once it carries an event stream (SO_SNDBUF;
        /// Linux reserves twice this). Left alone, Linux grows it to 4 MiB for a client that
        /// does not read, outside `streamBufferLimit`; fixed, a stream's bytes wait in its queue,
        /// where the limit applies.
        public var streamSendBuffer: Int
        public var listenBacklog: Int
        /// How long `EventStream.close()` may spend flushing queued bytes.
        public var streamCloseTimeout: Duration
        /// How long a closing connection keeps draining client bytes after the last response,
        /// so that unread input does not turn the close into a reset that loses the response.
        public var lingerTimeout: Duration
        /// What drives the event loops: epoll (Linux) or Dispatch sources (everywhere).
        public var backend: IOBackend

        public init(
            host: String = "127.0.0.1",
            port: Int = 8080,
            loopCount: Int = Configuration.onlineCores,
            maxConnections: Int? = nil,
            maxRequestLineBytes: Int = 8 * 1024,
            maxHeaderBytes: Int = 16 * 1024,
            maxBodyBytes: Int = 1 << 20,
            headerTimeout: Duration = .seconds(10),
            bodyTimeout: Duration = .seconds(30),
            idleTimeout: Duration = .seconds(60),
            streamBufferLimit: Int = 1 << 20,
            streamStallTimeout: Duration = .seconds(5),
            maxBufferedOutput: Int? = nil,
            maxBufferedBodies: Int? = nil,
            streamSendBuffer: Int = 64 * 1024,
            connectionSendBuffer: Int = 256 * 1024,
            listenBacklog: Int = 4096,
            streamCloseTimeout: Duration = .seconds(2),
            lingerTimeout: Duration = .seconds(2),
            backend: IOBackend = .platformDefault
        ) {
            self.host = host
            self.port = port
            self.loopCount = loopCount
            self.maxConnections = maxConnections
            self.maxRequestLineBytes = maxRequestLineBytes
            self.maxHeaderBytes = maxHeaderBytes
            self.maxBodyBytes = maxBodyBytes
            self.headerTimeout = headerTimeout
            self.bodyTimeout = bodyTimeout
            self.idleTimeout = idleTimeout
            self.streamBufferLimit = streamBufferLimit
            self.streamStallTimeout = streamStallTimeout
            self.maxBufferedOutput = maxBufferedOutput
            self.maxBufferedBodies = maxBufferedBodies
            self.streamSendBuffer = streamSendBuffer
            self.connectionSendBuffer = connectionSendBuffer
            self.listenBacklog = listenBacklog
            self.streamCloseTimeout = streamCloseTimeout
            self.lingerTimeout = lingerTimeout
            self.backend = backend
        }

        /// Whether `start()` can listen on `host`, as far as its form goes: configuration
        /// parsers check it up front, so a typo is a usage error rather than a failed start.
        public static func isListenable(host: String) -> Bool {
            ListeningSocket.address(host: host, port: 0) != nil
        }

        /// What `host` must be, for error messages.
        public static let hostRequirement = "not a numeric IPv4 or IPv6 address (nor localhost)"

        /// The number of online cores (at least 1).
        public static var onlineCores: Int {
            max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN)))
        }
    }
}

/// The configuration in the units the loops work in.
struct LoopSettings: Sendable {
    let maxRequestLineBytes: Int
    let maxHeaderBytes: Int
    let maxBodyBytes: Int
    let headerTimeout: Int64
    let bodyTimeout: Int64
    let idleTimeout: Int64
    let streamCloseTimeout: Int64
    let lingerTimeout: Int64
    let streamBufferLimit: Int
    let streamStallTimeout: Int64
    let maxBufferedOutput: Int?
    let maxBufferedBodies: Int?
    let streamSendBuffer: Int32
    let connectionSendBuffer: Int32
    let maxConnections: Int?
    let backend: IOBackend
    /// How often timeouts are checked: a quarter of the shortest, between 5 ms and 250 ms.
    let sweepInterval: Int64

    /// Input a connection may hold unparsed while its current request is being handled;
    /// beyond it the connection is left unread until the answer is out.
    let maxBufferedInput = 64 * 1024
    /// Unsent response bytes beyond which a connection's next request is not started and its
    /// input is left unread: a client that does not read its answers gets no more of them.
    /// These are navd's own; the socket holds up to twice `connectionSendBuffer` more.
    let outputHighWater = 256 * 1024
    /// What a client waiting on a stall timeout must take from its socket to count as reading:
    /// 16 KiB in each `streamStallTimeout` (5 s by default, about 3 KB a second), so that
    /// what waits for it is freed within a bounded time.
    let minimumProgressBytes = 16 * 1024
    /// Refused connections (over capacity, shutting down) that may drain at once, server-wide;
    /// past it, a refusal is written and its connection closed at once, reset or not.
    let maxRefusingConnections = 256

    init(_ configuration: HTTPServer.Configuration) {
        maxRequestLineBytes = max(16, configuration.maxRequestLineBytes)
        backend = configuration.backend
        maxHeaderBytes = max(0, configuration.maxHeaderBytes)
        maxBodyBytes = max(0, configuration.maxBodyBytes)
        headerTimeout = MonotonicClock.nanoseconds(configuration.headerTimeout)
        bodyTimeout = MonotonicClock.nanoseconds(configuration.bodyTimeout)
        idleTimeout = MonotonicClock.nanoseconds(configuration.idleTimeout)
        streamCloseTimeout = MonotonicClock.nanoseconds(configuration.streamCloseTimeout)
        lingerTimeout = MonotonicClock.nanoseconds(configuration.lingerTimeout)
        streamBufferLimit = max(1, configuration.streamBufferLimit)
        streamStallTimeout = MonotonicClock.nanoseconds(configuration.streamStallTimeout)
        maxBufferedOutput = configuration.maxBufferedOutput.map { max(0, $0) }
        maxBufferedBodies = configuration.maxBufferedBodies.map { max(0, $0) }
        streamSendBuffer = Int32(clamping: max(4096, configuration.streamSendBuffer))
        connectionSendBuffer = Int32(clamping: max(4096, configuration.connectionSendBuffer))
        maxConnections = configuration.maxConnections
        let shortest = [headerTimeout, bodyTimeout, idleTimeout, streamCloseTimeout, lingerTimeout, streamStallTimeout].min() ?? 0
        sweepInterval = min(250_000_000, max(5_000_000, shortest / 4))
    }
}
