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

    /// The items of one stream, in order. Items the consumer has not read yet hold about
    /// `maxEventBytes` at most between them (their text, and 128 bytes each, so empty events
    /// count too): URLSession cannot be paused, so a consumer that falls that
    /// far behind (a main actor busy with a long layout while a server floods) ends the stream
    /// with an error, and the mirror resumes from the last event it applied.
    struct Items: AsyncSequence, Sendable {
        fileprivate let base: AsyncThrowingStream<Item, any Error>
        fileprivate let unread: UnreadBytes

        struct AsyncIterator: AsyncIteratorProtocol {
            fileprivate var base: AsyncThrowingStream<Item, any Error>.AsyncIterator
            fileprivate let unread: UnreadBytes

            mutating func next(isolation actor: isolated (any Actor)?) async throws(any Error) -> Item? {
                let item = try await base.next(isolation: actor)
                if let item { unread.read(item) }
                return item
            }

            mutating func next() async throws -> Item? {
                try await next(isolation: nil)
            }
        }

        func makeAsyncIterator() -> AsyncIterator {
            AsyncIterator(base: base.makeAsyncIterator(), unread: unread)
        }
    }

    /// Opens `url`. `idleTimeout` bounds the silence between bytes: navd sends a comment at
    /// least every 15 s, so a longer silence means the connection is gone. `maxEventBytes`
    /// bounds one event (`ServerSentEventParser.maxEventBytes`), and the events not read yet.
    /// `configuration` is the client's own (proxies, headers, TLS), as for every other request.
    static func open(_ url: URL, idleTimeout: TimeInterval, maxEventBytes: Int,
                     configuration: URLSessionConfiguration) -> Items {
        let unread = UnreadBytes(limit: maxEventBytes)
        let base = AsyncThrowingStream<Item, any Error>(bufferingPolicy: .unbounded) { continuation in
            let delegate = StreamDelegate(continuation: continuation, maxEventBytes: maxEventBytes, unread: unread)
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
        return Items(base: base, unread: unread)
    }
}

/// What the items handed on but not read yet hold, shared by the delegate that hands them on
/// and the consumer that reads them.
private final class UnreadBytes: Sendable {
    /// What an item holds beyond its text: its place in the stream's buffer and the event's
    /// fields. Counted for every item, so a flood of empty events (`data:` and a blank line,
    /// seven bytes each on the wire) fills the limit as surely as large ones.
    static let itemOverhead = 128

    private let bytes = Atomic<Int>(0)
    let limit: Int

    init(limit: Int) {
        self.limit = limit
    }

    static func cost(of item: EventStreamConnection.Item) -> Int {
        guard case .event(let event) = item else { return itemOverhead }
        return itemOverhead + event.data.utf8.count + event.type.utf8.count + (event.id?.utf8.count ?? 0)
    }

    /// Counts `items` as handed on; false when they would take the unread bytes past the limit
    /// (what arrives while nothing waits always fits: the parser bounds an event by the same limit).
    func handOn(_ items: [EventStreamConnection.Item]) -> Bool {
        let added = items.reduce(0) { $0 + Self.cost(of: $1) }
        let before = bytes.add(added, ordering: .relaxed).oldValue
        return before == 0 || before + added <= limit
    }

    func read(_ item: EventStreamConnection.Item) {
        bytes.subtract(Self.cost(of: item), ordering: .relaxed)
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
        /// The stream was ended here (a refusal read, a consumer too far behind): what the
        /// task still reports is ignored.
        var finished = false
    }

    /// What is kept of an error answer's body, for the error it names.
    private static let refusalBodyBytes = 4096

    private let continuation: AsyncThrowingStream<EventStreamConnection.Item, any Error>.Continuation
    private let unread: UnreadBytes
    private let state = Mutex(State())

    init(continuation: AsyncThrowingStream<EventStreamConnection.Item, any Error>.Continuation, maxEventBytes: Int,
         unread: UnreadBytes) {
        self.continuation = continuation
        self.unread = unread
        state.withLock { state in
            state.parser.maxEventBytes = maxEventBytes
            // A mirror cannot apply what follows a gap: the stream stops at an oversized event.
            state.parser.stopsAtOversizedEvent = true
        }
    }

    /// A 200 that is not an event stream (a captive portal's page, a proxy's) is refused
    /// before its body is read, as browsers' EventSource does.
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        let http = response as? HTTPURLResponse
        let type = http?.value(forHTTPHeaderField: "Content-Type")?.split(separator: ";").first?
            .trimmingCharacters(in: .whitespaces).lowercased()
        if http?.statusCode == 200, type != "text/event-stream" {
            finish(throwing: NavdError.invalidResponse("the event stream answered 200 with \(type ?? "no") Content-Type"))
            return completionHandler(.cancel)
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let status = (dataTask.response as? HTTPURLResponse)?.statusCode ?? 0
        enum Next { case handOn([EventStreamConnection.Item]), last([EventStreamConnection.Item]), refuse(NavdError), fellBehind }
        let next: Next = state.withLock { state in
            if state.finished { return .handOn([]) }
            if status != 200 {
                // An error answer: its body names the error. Answered as soon as it reads as
                // JSON or fills what is kept of it, so a body that never ends holds nothing.
                var refusal = state.refusal ?? (status, Data())
                refusal.body.append(data.prefix(Self.refusalBodyBytes - refusal.body.count))
                state.refusal = refusal
                let complete = refusal.body.count >= Self.refusalBodyBytes || (try? JSONDecoder().decode(JSONValue.self, from: refusal.body)) != nil
                return complete ? .refuse(Self.refusal(status: status, body: refusal.body)) : .handOn([])
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
            // Nothing follows an oversized event (the parser stops there): the stream ends with it.
            let stops = state.parser.oversizedEvents > 0
            if stops { items.append(.oversized) }
            guard unread.handOn(items) else { return .fellBehind }
            guard stops else { return .handOn(items) }
            state.finished = true
            return .last(items)
        }
        switch next {
        case .handOn(let items):
            for item in items { continuation.yield(item) }
        case .last(let items):
            for item in items { continuation.yield(item) }
            continuation.finish()
            dataTask.cancel()
        case .refuse(let error):
            finish(throwing: error)
            dataTask.cancel()
        case .fellBehind:
            finish(throwing: NavdError.transport("events arrived faster than they were read (over \(unread.limit) bytes unread)"))
            dataTask.cancel()
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        defer { session.finishTasksAndInvalidate() }
        let status = (task.response as? HTTPURLResponse)?.statusCode ?? 0
        let refusal = state.withLock { $0.refusal }
        if status != 0 && status != 200 {
            finish(throwing: Self.refusal(status: status, body: refusal?.body ?? Data()))
        } else if let error {
            finish(throwing: NavdError.transport(String(describing: error)))
        } else {
            finish(throwing: nil)
        }
    }

    /// Ends the stream once; what the task reports after that is ignored.
    private func finish(throwing error: NavdError?) {
        let first = state.withLock { state in
            defer { state.finished = true }
            return !state.finished
        }
        guard first else { return }
        continuation.finish(throwing: error)
    }

    private static func refusal(status: Int, body: Data) -> NavdError {
        .server(status: status, body: (try? JSONDecoder().decode(JSONValue.self, from: body)) ?? .null, message: "event stream refused")
    }
}
