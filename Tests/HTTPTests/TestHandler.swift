import Dispatch
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTP
import Synchronization

/// Routes used by the tests:
/// - `/slow?ms=N`: answers from another thread after N ms;
/// - `/stream?count=N`: opens an event stream and sends N events;
/// - `/slowstream`: opens an event stream from another thread after 150 ms;
/// - `/big?size=N`: N bytes of body;
/// - `/never`: drops its responder without answering;
/// - `/block?ms=N`: holds the loop thread for N ms before answering (to fill the backlog);
/// - `/refuse-body`: refused before its body when the request waits for `100 Continue`;
/// - `/flood?size=N`: opens an event stream that a thread of its own keeps full of N-byte
///   events, as fast as the stream takes them, until it closes;
/// - anything else: echoes method, path, query and body as JSON.
final class TestHandler: HTTPHandler {
    let streams = Mutex<[EventStream]>([])
    let closeReasons = Mutex<[EventStreamCloseReason]>([])
    let requestCount = Atomic<Int>(0)
    let refusals = Mutex<[HTTPRefusal]>([])

    func response(to refusal: HTTPRefusal) -> HTTPResponse {
        refusals.withLock { $0.append(refusal) }
        return Self.render(refusal)
    }

    /// How the test handlers write a refusal: what the HTTP layer told them, so a test sees the
    /// handler wrote it and with what.
    static func render(_ refusal: HTTPRefusal) -> HTTPResponse {
        let json = #"{"refused":"\#(refusal.error.kind)","message":"\#(refusal.error.message)","path":"\#(refusal.request?.path ?? "")"}"#
        return .json(status: 599, Array(json.utf8), headers: ["X-Refused": "\(refusal.error.kind)"])
    }

    /// `/refuse-body` refuses a request waiting for `100 Continue` before its body.
    func answerBeforeBody(_ request: HTTPRequest, peer: PeerAddress) -> HTTPResponse? {
        request.path == "/refuse-body" ? HTTPResponse(status: 403, body: Array("not this one".utf8)) : nil
    }

    func handle(_ request: HTTPRequest, responder: HTTPResponder) {
        requestCount.add(1, ordering: .relaxed)
        switch request.path {
        case "/slow":
            let milliseconds = Int(request.queryValue("ms") ?? "") ?? 100
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(milliseconds)) {
                responder.respond(Self.echo(request))
            }
        case "/stream":
            let stream = openStream(responder)
            for index in 0..<(Int(request.queryValue("count") ?? "") ?? 0) {
                stream.send(Array("data: \(index)\n\n".utf8))
            }
        case "/slowstream":
            DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(150)) { _ = self.openStream(responder) }
        case "/big":
            let size = Int(request.queryValue("size") ?? "") ?? 0
            responder.respond(HTTPResponse(status: 200, body: [UInt8](repeating: UInt8(ascii: "x"), count: size)))
        case "/never":
            break
        case "/block":
            usleep(UInt32(Int(request.queryValue("ms") ?? "") ?? 100) * 1000)
            responder.respond(Self.echo(request))
        case "/flood":
            let stream = openStream(responder)
            let size = Int(request.queryValue("size") ?? "") ?? 1024
            let event = Array("data: \(String(repeating: "f", count: max(0, size - 8)))\n\n".utf8)
            DispatchQueue(label: "flood").async {
                // Keeps the queue near the high-water mark: never empty, never over the limit.
                while stream.isOpen {
                    if stream.queuedByteCount < Self.floodHighWater {
                        for _ in 0..<64 { stream.send(event) }
                    } else {
                        usleep(100)
                    }
                }
            }
        default:
            responder.respond(Self.echo(request))
        }
    }

    /// Opens an event stream the tests can reach (`streams`) and whose end they can see (`closeReasons`).
    private func openStream(_ responder: HTTPResponder) -> EventStream {
        let stream = responder.startEventStream(headers: ["Content-Type": "text/event-stream"])
        stream.onClose { reason in self.closeReasons.withLock { $0.append(reason) } }
        streams.withLock { $0.append(stream) }
        return stream
    }

    /// Queued bytes below which `/flood` adds more (streamBufferLimit must be well above it).
    static let floodHighWater = 16 << 20

    static func echo(_ request: HTTPRequest) -> HTTPResponse {
        var json = "{\"method\":\"\(request.method)\",\"path\":\"\(request.path)\",\"query\":["
        json += request.query.map { "\"\($0.name)=\($0.value)\"" }.joined(separator: ",")
        json += "],\"body\":\"\(String(decoding: request.body, as: UTF8.self))\"}"
        return .json(status: 200, Array(json.utf8), headers: ["X-Test": "yes"])
    }

    /// Polls until the condition holds or the timeout passes.
    static func eventually(timeout: Double = 3, _ condition: () -> Bool) -> Bool {
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while ContinuousClock.now < deadline {
            if condition() { return true }
            usleep(5_000)
        }
        return condition()
    }
}

extension HTTPHandler {
    func response(to refusal: HTTPRefusal) -> HTTPResponse { TestHandler.render(refusal) }
}

/// Starts a server on an ephemeral port with short test timeouts; `body` runs against it,
/// and the server is shut down afterwards.
func withServer(
    _ adjust: (inout HTTPServer.Configuration) -> Void = { _ in },
    handler: TestHandler = TestHandler(),
    _ body: (HTTPServer, TestHandler) throws -> Void
) throws {
    var configuration = HTTPServer.Configuration(
        port: 0, loopCount: 2, headerTimeout: .seconds(2), bodyTimeout: .seconds(2), idleTimeout: .seconds(5),
        lingerTimeout: .milliseconds(500), backend: .underTest)
    adjust(&configuration)
    let server = HTTPServer(configuration: configuration, handler: handler)
    try server.start()
    defer { server.finishShutdown(deadline: .now + .seconds(1)) }
    try body(server, handler)
}
