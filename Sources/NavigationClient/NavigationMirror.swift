import Foundation
import Observation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Where a mirror's event stream stands.
public enum ConnectionState: Sendable, Hashable {
    /// Opening the stream (first, or after a back-off).
    case connecting
    /// The stream is open and events arrive.
    case open
    /// The stream broke; the mirror waits out its back-off and resumes where it stopped.
    case reconnecting
    /// For good: the session ended (`end`), the credentials stopped working, or `stop()`.
    case ended
}

/// A live copy of one session's navigation tree that a SwiftUI or UIKit app observes.
///
/// It follows the session's event stream: every connection (and every reconnection, after a
/// back-off) takes a fresh one-time ticket, so the token never appears in a URL, and resumes
/// with `lastEventId`, so no event is missed or applied twice. An event that does not fit the
/// tree makes it start over from a fresh snapshot.
@MainActor @Observable
public final class NavigationMirror {
    /// The tree as `GET …/navigation` returns it; nil until the first snapshot.
    public private(set) var tree: NavigationNode?
    /// Where the event stream stands; a UI may show it.
    public private(set) var connection: ConnectionState = .connecting
    /// Why the mirror ended: `end`'s reason (`deleted`, `expired`, `shutdown`), `unauthorized`,
    /// `gone`, `stopped`, or `eventTooLarge` (an event over `maxEventBytes`, which every
    /// reconnection would meet again).
    public private(set) var endReason: String?
    /// The id of the last event applied; a reconnection resumes after it.
    public private(set) var lastEventID: Int?
    /// The session's version as of the last snapshot.
    public private(set) var snapshotVersion: Int?

    /// Back-off between reconnections: doubles from `initial` up to `maximum`, with jitter.
    public struct RetryPolicy: Sendable {
        /// The first wait.
        public var initial: Duration
        /// The longest wait.
        public var maximum: Duration
        /// A policy with the given bounds.
        public init(initial: Duration = .milliseconds(500), maximum: Duration = .seconds(10)) {
            self.initial = initial
            self.maximum = maximum
        }
    }

    /// The session it mirrors.
    public let session: SessionClient
    private let retry: RetryPolicy
    private let idleTimeout: TimeInterval
    private let maxEventBytes: Int
    @ObservationIgnored private var task: Task<Void, Never>?
    @ObservationIgnored private var serverRetry: Duration?
    /// Called after each applied event with its id (tests and logs; the tree is what a UI reads).
    @ObservationIgnored public var onEvent: ((Int?, NavigationEvent) -> Void)?

    /// - Parameter idleTimeout: seconds without a byte (navd sends a comment every 15 s) after which
    /// the stream counts as broken and is reopened.
    /// - Parameter maxEventBytes: the largest event taken, a snapshot of the whole tree included.
    public init(session: SessionClient, retry: RetryPolicy = RetryPolicy(), idleTimeout: TimeInterval = 45,
                maxEventBytes: Int = 64 << 20) {
        self.session = session
        self.retry = retry
        self.idleTimeout = idleTimeout
        self.maxEventBytes = maxEventBytes
    }

    /// Starts following the session. The stream holds the mirror until `stop()` or the
    /// session's end: call `stop()` when the screen that shows it goes away.
    public func start() {
        guard task == nil, connection != .ended else { return }
        task = Task { [weak self] in await self?.run() }
    }

    /// Stops following the session (the session itself goes on).
    public func stop() {
        finish("stopped")
    }

    private func run() async {
        // Failures to open a stream in a row; a stream that answers starts them over.
        var attempt = 0
        // Fresh snapshots in a row that the next event did not fit: the wait grows with them
        // too, so a mirror that keeps falling out of step backs off, though each stream answers.
        var outOfStep = 0
        while !Task.isCancelled, connection != .ended {
            do {
                let ticket: String
                do { ticket = try await session.streamTicket() } catch {
                    // 401: the token no longer works; 404: the session ended while we were away.
                    if error.status == 401 || error.status == 404 { return finish(error.status == 404 ? "gone" : "unauthorized") }
                    throw error
                }
                let stream = EventStreamConnection.open(try streamURL(ticket: ticket), idleTimeout: idleTimeout,
                                                        maxEventBytes: maxEventBytes, configuration: session.client.transport.configuration)
                for try await item in stream {
                    // `stop()` may have run while this waited for the item.
                    if connection == .ended { return }
                    switch item {
                    case .open:
                        connection = .open
                        attempt = 0
                    case .retry(let milliseconds):
                        serverRetry = .milliseconds(milliseconds)
                    case .event(let event):
                        if try receive(event) { outOfStep = 0 }
                    case .oversized:
                        return finish("eventTooLarge")
                    }
                    if connection == .ended { return }
                }
            } catch let error as NavdError {
                // 404 on the stream: the session is gone. (A 401 there is a spent or expired ticket:
                // the next try takes another, and ends the mirror if the token itself stopped working.)
                if error.status == 404 { return finish("gone") }
            } catch {
                // Out of step with the server: start over from a fresh snapshot.
                lastEventID = nil
                outOfStep += 1
            }
            guard !Task.isCancelled, connection != .ended else { return }
            connection = .reconnecting
            try? await Task.sleep(for: delay(max(attempt, outOfStep)))
            attempt += 1
        }
    }

    /// Applies a mutation's own events (its answer lists them) at once, when they follow on
    /// from the last event applied, so that what a caller reads right after `await` shows its
    /// change; the stream brings them again, and they are skipped by id. From the first that
    /// does not follow on (another client's or an effect's event is still on its way), or does
    /// not fit, they are left to the stream, which brings everything in order.
    ///
    ///     mirror.apply(try await mirror.session.perform("incrementButtonTapped"))
    public func apply(_ result: MutationResult) {
        for (id, event) in result.events {
            guard connection != .ended, let last = lastEventID else { return }
            if id <= last { continue }
            if case .snapshot = event { return }
            guard id == last + 1, (try? NavigationTree.apply(event, to: &tree)) != nil else { return }
            lastEventID = id
            onEvent?(id, event)
            if case .end(let reason) = event { finish(reason) }
        }
    }

    /// Applies one event; true when it moved the tree on past a snapshot (any applied event but
    /// a snapshot): back in step.
    private func receive(_ message: ServerSentEvent) throws -> Bool {
        // Only an event's own id says it was applied before; one it inherited from an earlier
        // event says nothing (navd gives every event its own).
        let id = message.hasOwnID ? message.id.flatMap { Int($0) } : nil
        guard let event = try NavigationEvent(type: message.type, data: Data(message.data.utf8)) else { return false }
        if case .snapshot = event {} else if let id, let last = lastEventID, id <= last { return false }
        try NavigationTree.apply(event, to: &tree)
        if let id { lastEventID = id }
        if case .snapshot(let version, _) = event { snapshotVersion = version }
        onEvent?(id, event)
        if case .end(let reason) = event { finish(reason) }
        if case .snapshot = event { return false }
        return true
    }

    private func streamURL(ticket: String) throws(NavdError) -> URL {
        let url = session.client.baseURL.appending(path: session.path("/events"))
        guard var components = URLComponents(url: url, resolvingAgainstBaseURL: false) else { throw .transport("bad URL \(url)") }
        components.queryItems = [URLQueryItem(name: "ticket", value: ticket)]
            + (lastEventID.map { [URLQueryItem(name: "lastEventId", value: String($0))] } ?? [])
        guard let result = components.url else { throw .transport("bad URL \(url)") }
        return result
    }

    private func delay(_ attempt: Int) -> Duration {
        let doubled = retry.initial * Double(1 << min(attempt, 16))
        let base = max(min(doubled, retry.maximum), serverRetry.map { min($0, retry.maximum) } ?? .zero)
        return base * Double.random(in: 0.75...1.25)
    }

    private func finish(_ reason: String) {
        guard connection != .ended else { return }
        endReason = reason
        connection = .ended
        task?.cancel()
        task = nil
    }
}
