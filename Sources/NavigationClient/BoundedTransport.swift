import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The client's requests other than event streams, on a URLSession of its own, whose delegate
/// reads each answer only up to `maxResponseBytes`. `URLSession.data(for:)` keeps whatever a
/// server sends, so a buggy or hostile one could fill the app's memory with a single answer.
final class BoundedTransport: Sendable {
    private let session: URLSession
    private let bodies: BoundedBodies
    /// The configuration's bound on a silence while an answer is awaited or read.
    let idleTimeout: TimeInterval
    /// A copy of the configuration the client was made with, for its event streams.
    var configuration: URLSessionConfiguration { session.configuration }

    init(configuration: URLSessionConfiguration, maxResponseBytes: Int) {
        let configuration = configuration.copy() as? URLSessionConfiguration ?? .ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        idleTimeout = configuration.timeoutIntervalForRequest
        bodies = BoundedBodies(limit: maxResponseBytes)
        session = URLSession(configuration: configuration, delegate: bodies, delegateQueue: nil)
    }

    /// A session holds its delegate until it is invalidated: without this, every client made
    /// would live as long as the process.
    deinit {
        session.finishTasksAndInvalidate()
    }

    /// The answer to `request`, its body whole, within `limit` seconds; a body past
    /// `maxResponseBytes` is not read on. The configuration's bound on silence alone would let a
    /// server that sends a byte now and then hold a request for as long as it likes.
    func data(for request: URLRequest, within limit: TimeInterval) async throws(NavdError) -> (Data, HTTPURLResponse) {
        let task = session.dataTask(with: request)
        // Held weakly: a cancelled item is dropped only at its deadline, and would keep the
        // finished task until then.
        let deadline = DispatchWorkItem { [weak bodies, weak task] in
            if let bodies, let task { bodies.timeOut(task, after: limit) }
        }
        defer { deadline.cancel() }
        let result: Result<(Data, HTTPURLResponse), NavdError> = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                bodies.expect(task.taskIdentifier, continuation)
                // Cancelled before it was expected: the handler below found nothing to answer.
                if Task.isCancelled { bodies.cancel(task) } else {
                    DispatchQueue.global().asyncAfter(deadline: .now() + limit, execute: deadline)
                    task.resume()
                }
            }
        } onCancel: {
            bodies.cancel(task)
        }
        return try result.get()
    }
}

/// Each task's body so far and who waits for it, keyed by task.
private final class BoundedBodies: NSObject, URLSessionDataDelegate, Sendable {
    typealias Waiter = CheckedContinuation<Result<(Data, HTTPURLResponse), NavdError>, Never>

    private struct Pending {
        var body = Data()
        let waiter: Waiter
    }

    private let limit: Int
    private let pending = Mutex([Int: Pending]())

    init(limit: Int) {
        self.limit = limit
    }

    func expect(_ task: Int, _ waiter: Waiter) {
        pending.withLock { $0[task] = Pending(waiter: waiter) }
    }

    /// Answers the task's waiter once; what the task reports after that is ignored.
    private func finish(_ task: Int, _ result: Result<(Data, HTTPURLResponse), NavdError>) {
        pending.withLock { $0.removeValue(forKey: task) }?.waiter.resume(returning: result)
    }

    func cancel(_ task: URLSessionTask) {
        finish(task.taskIdentifier, .failure(.transport("cancelled")))
        task.cancel()
    }

    func timeOut(_ task: URLSessionTask, after limit: TimeInterval) {
        let seconds = limit.rounded() == limit && abs(limit) < 1e15 ? String(Int(limit)) : String(limit)
        finish(task.taskIdentifier, .failure(.transport("no whole answer within \(seconds) s")))
        task.cancel()
    }

    private func tooLarge(_ task: URLSessionTask) {
        finish(task.taskIdentifier, .failure(.invalidResponse("an answer over \(limit) bytes")))
        task.cancel()
    }

    /// An answer that says in advance it is too long is refused before its body is read.
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping @Sendable (URLSession.ResponseDisposition) -> Void) {
        if response.expectedContentLength > Int64(limit) {
            tooLarge(dataTask)
            return completionHandler(.cancel)
        }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        let id = dataTask.taskIdentifier
        let fits = pending.withLock { pending -> Bool in
            guard let count = pending[id]?.body.count else { return true }
            guard count + data.count <= limit else { return false }
            pending[id]?.body.append(data)
            return true
        }
        if !fits { tooLarge(dataTask) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let body = pending.withLock { $0[task.taskIdentifier]?.body } ?? Data()
        if let error {
            finish(task.taskIdentifier, .failure(.transport(String(describing: error))))
        } else if let response = task.response as? HTTPURLResponse {
            finish(task.taskIdentifier, .success((body, response)))
        } else {
            finish(task.taskIdentifier, .failure(.invalidResponse("not HTTP")))
        }
    }
}
