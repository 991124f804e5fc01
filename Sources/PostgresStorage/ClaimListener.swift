import Dispatch
import SessionStorage
import Synchronization

/// Hears, on a connection of its own, what every node announces when it takes a session over
/// (`LISTEN`/`NOTIFY`, PostgreSQL's own), so a node that was taken over lets the session go at
/// once: its streams close and their clients reconnect, through the router, to the new owner.
/// Without it the old owner would only find out at its next write, and a stream it still held
/// would hear nothing meanwhile.
///
/// A lost connection is opened again every second; what was announced in between is not heard
/// (the fence still refuses the old owner's writes).
final class ClaimListener: Sendable {
    typealias Handler = @Sendable (_ id: String, _ epoch: Int) -> Void

    /// The connection and its read source: made, used and dropped on `queue` only, which is
    /// what makes handing them to the state's lock safe.
    private struct Listening: @unchecked Sendable {
        let connection: PostgresConnection
        let source: any DispatchSourceRead
    }

    private struct State {
        var listening: Listening?
        var handler: Handler?
        var closed = false
    }

    private let url: String
    private let queue = DispatchQueue(label: "navd.store.listener")
    private let state = Mutex(State())
    private static let retryDelay: DispatchTimeInterval = .seconds(1)

    init(url: String) {
        self.url = url
    }

    /// Starts listening with `handler`; called once.
    func start(_ handler: @escaping Handler) {
        state.withLock { $0.handler = handler }
        queue.async { self.connect() }
    }

    func close() {
        queue.sync {
            let listening = state.withLock { state -> Listening? in
                state.closed = true
                return state.listening
            }
            listening?.source.cancel()
        }
        // The cancel handler, queued behind this, lets the connection go.
        queue.sync {}
    }

    /// On the queue: connects, listens, and reads whenever the socket has something.
    private func connect() {
        guard !state.withLock({ $0.closed }) else { return }
        do throws(PostgresConnection.Failure) {
            let connection = try PostgresConnection(url: url)
            try connection.execute("LISTEN \(PostgresSchema.claimsChannel)")
            let source = DispatchSource.makeReadSource(fileDescriptor: connection.socket, queue: queue)
            source.setEventHandler { [self] in read() }
            // libpq closes the socket with the connection: only once the source is done with it.
            // On the queue, so before any reconnection (which comes a while after, on the queue too).
            source.setCancelHandler { [self] in state.withLock { $0.listening = nil } }
            let listening = Listening(connection: connection, source: source)
            state.withLock { $0.listening = listening }
            listening.source.resume()
        } catch {
            queue.asyncAfter(deadline: .now() + Self.retryDelay) { self.connect() }
        }
    }

    private func read() {
        let (listening, handler) = state.withLock { ($0.listening, $0.handler) }
        guard let listening else { return }
        do throws(PostgresConnection.Failure) {
            let notifications = try listening.connection.notifications()
            guard listening.connection.isConnected else { throw PostgresConnection.Failure(message: "connection lost") }
            for notification in notifications where notification.channel == PostgresSchema.claimsChannel {
                guard let (id, epoch) = Self.parse(notification.payload) else { continue }
                handler?(id, epoch)
            }
        } catch {
            listening.source.cancel()
            queue.asyncAfter(deadline: .now() + Self.retryDelay) { self.connect() }
        }
    }

    /// `"<id> <epoch>"`, as a claim or a deletion announces it.
    static func parse(_ payload: String) -> (String, Int)? {
        let parts = payload.split(separator: " ")
        guard parts.count == 2, let epoch = Int(parts[1]) else { return nil }
        return (String(parts[0]), epoch)
    }
}
