import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// One HTTP event stream on URLSession: a streaming data task whose delegate parses the bytes
/// as they arrive. It ends when the server closes the stream, the connection breaks, or the
/// consumer stops listening; reconnecting is `NavigationMirror`'s job.
enum EventStreamConnection {
    enum Item: Sendable {
        /// The server accepted the stream (200, text/event-stream).
        case open
        /// The server's `retry:` advice, in milliseconds.
        case retry(Int)
        case event(ServerSentEvent)
        /// An event over `maxEventBytes` was dropped whole: this stream cannot be followed.
        case oversized
    }

    /// Opens `url`. `idleTimeout` bounds the silence between bytes: navd sends a comment at
    /// least every 15 s, so a longer silence means the connection is gone. `maxEventBytes`
    /// bounds one event (`ServerSentEventParser.maxEventBytes`).
    static func open(_ url: URL, idleTimeout: TimeInterval, maxEventBytes: Int,
                     configuration: URLSessionConfiguration = .ephemeral) -> AsyncThrowingStream<Item, any Error> {
        AsyncThrowingStream(bufferingPolicy: .unbounded) { continuation in
            let delegate = StreamDelegate(continuation: continuation, maxEventBytes: maxEventBytes)
            let configuration = configuration.copy() as? URLSessionConfiguration ?? .ephemeral
            configuration.timeoutIntervalForRequest = idleTimeout
            configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
            let session = URLSession(configuration: configuration, delegate: delegate, delegateQueue: nil)
            var request = URLRequest(url: url)
            request.setValue("text/event-stream", forHTTPHeaderField: "Accept")
            let task = session.dataTask(with: request)
            continuation.onTermination = { _ in
                task.cancel()
                session.invalidateAndCancel()
            }
            task.resume()
        }
    }
}

/// Feeds a data task's bytes to the parser and hands on what it dispatches. URLSession calls
/// a delegate on its own serial queue; the lock makes that explicit to the compiler.
private final class StreamDelegate: NSObject, URLSessionDataDelegate, Sendable {
    private struct State {
        var parser = ServerSentEventParser()
        var retry: Int?
        var opened = false
        var refusal: (status: Int, body: Data)?
    }

    private let continuation: AsyncThrowingStream<EventStreamConnection.Item, any Error>.Continuation
    private let state = Mutex(State())

    init(continuation: AsyncThrowingStream<EventStreamConnection.Item, any Error>.Continuation, maxEventBytes: Int) {
        self.continuation = continuation
        state.withLock { $0.parser.maxEventBytes = maxEventBytes }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let status = (dataTask.response as? HTTPURLResponse)?.statusCode ?? 0
        let items: [EventStreamConnection.Item] = state.withLock { state in
            if status != 200 {
                // An error answer: keep (a bounded part of) its body for the error it names.
                var refusal = state.refusal ?? (status, Data())
                if refusal.body.count < 4096 { refusal.body.append(data.prefix(4096 - refusal.body.count)) }
                state.refusal = refusal
                return []
            }
            var items: [EventStreamConnection.Item] = []
            if !state.opened {
                state.opened = true
                items.append(.open)
            }
            let events = state.parser.feed(data)
            if let retry = state.parser.retry, retry != state.retry {
                state.retry = retry
                items.append(.retry(retry))
            }
            items += events.map(EventStreamConnection.Item.event)
            if state.parser.oversizedEvents > 0 { items.append(.oversized) }
            return items
        }
        for item in items { continuation.yield(item) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let status = (task.response as? HTTPURLResponse)?.statusCode ?? 0
        let refusal = state.withLock { $0.refusal }
        if status != 0 && status != 200 {
            let body = refusal?.body ?? Data()
            let json = (try? JSONDecoder().decode(JSONValue.self, from: body)) ?? .null
            continuation.finish(throwing: NavdError.server(status: status, code: NavdErrorCode(json["error"]?["code"]?.stringValue ?? "http_error"),
                                                           message: json["error"]?["message"]?.stringValue ?? "event stream refused"))
        } else if let error {
            continuation.finish(throwing: NavdError.transport(String(describing: error)))
        } else {
            continuation.finish()
        }
        session.finishTasksAndInvalidate()
    }
}
