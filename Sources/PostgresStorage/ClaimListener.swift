import Dispatch
import SessionStorage
import Synchronization

/// Hears, on a connection of its own, what every node announces when it takes a session over
/// (`LISTEN`/`NOTIFY`, PostgreSQL's own), so a node that was taken over lets the session go at
/// once: its streams close and their clients reconnect, through the router, to the new owner.
/// Without it the old owner would only find out at its next write, and a stream it still held
/// would hear nothing meanwhile.
///
/// A lost connection is opened again every second. What was announced in between is read from
/// the rows once it listens again: the current epoch of every session the node holds, so a
/// takeover or a deletion it missed is heard late, never not at all.
final class ClaimListener: Sendable {
    typealias Handler = @Sendable (_ id: String, _ epoch: Int) -> Void
    typealias Held = @Sendable () -> [String]

    /// The connection and its read source: made, used and dropped on `queue` only, which is
    /// what makes handing them to the state's lock safe.
    private struct Listening: @unchecked Sendable {
        let connection: PostgresConnection
        let source: any DispatchSourceRead
    }

    private struct State {
        var listening: Listening?
        var handler: Handler?
        var held: Held?
        var closed = false
    }

    private let url: String
    private let answerTimeout: Duration
    private let queue = DispatchQueue(label: "navd.store.listener")
    private let state = Mutex(State())
    private static let retryDelay: DispatchTimeInterval = .seconds(1)

    init(url: String, answerTimeout: Duration) {
        self.answerTimeout = answerTimeout
        self.url = url
    }

    /// Starts listening with `handler`; called once. `held` lists the sessions to catch up on
    /// after a lost connection.
    func start(held: @escaping Held, _ handler: @escaping Handler) {
        state.withLock {
            $0.handler = handler
            $0.held = held
        }
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
            let connection = try PostgresConnection(url: url, answerTimeout: answerTimeout)
            try connection.execute("LISTEN \(PostgresSchema.claimsChannel)")
            // Listening from here on: whatever was announced before, the rows say now.
            try catchUp(on: connection)
            let source = DispatchSource.makeReadSource(fileDescriptor: connection.socket, queue: queue)
            source.setEventHandler { [self] in read() }
            // libpq closes the socket with the connection: only once the source is done with it.
            // On the queue, so before any reconnection (which comes a while after, on the queue too).
            source.setCancelHandler { [self] in state.withLock { $0.listening = nil } }
            let listening = Listening(connection: connection, source: source)
            state.withLock { $0.listening = listening }
            listening.source.resume()
            // Announcements that came during the catch-up query are already in libpq's buffer,
            // and the socket will not say so: read them now.
            read()
        } catch {
            queue.asyncAfter(deadline: .now() + Self.retryDelay) { self.connect() }
        }
    }

    /// The current epoch of every session the node holds (deleted or expired for one that is
    /// gone, as its announcement said): what it heard is then as if it had never stopped
    /// listening. Nothing to do at the first start.
    private func catchUp(on connection: PostgresConnection) throws(PostgresConnection.Failure) {
        let (held, handler) = state.withLock { ($0.held, $0.handler) }
        guard let held, let handler else { return }
        let ids = held()
        guard !ids.isEmpty else { return }
        var epochs: [String: Int] = [:]
        // Ids are the server's own (hex), so a comma is a safe separator.
        // Named for whoever reads pg_stat_activity: the listening connection's last query.
        // A session without a row is gone: expired if a sweep remembers deleting it.
        try connection.run("""
            /* navd listener catch-up */ SELECT id, epoch FROM navd_sessions WHERE id = ANY(string_to_array($1, ','))
            UNION ALL SELECT id, $2 FROM navd_expired WHERE id = ANY(string_to_array($1, ','))
            """, [.text(ids.joined(separator: ",")), .integer(SessionEpoch.expired)]) { row in
            epochs[row.text(0)] = row.integer(1)
        }
        for id in ids { handler(id, epochs[id] ?? SessionEpoch.deleted) }
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
