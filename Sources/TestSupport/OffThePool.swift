import Dispatch

/// Runs blocking work (a child process, libpq's connect, a semaphore) on a thread of its own,
/// never on Swift's cooperative pool: the in-process servers of tests running alongside run
/// their sessions on that pool, and two blocked threads are all of it on two cores.
public func offThePool<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { (done: CheckedContinuation<T, any Error>) in
        DispatchQueue.global().async { done.resume(with: Result { try body() }) }
    }
}
