import Dispatch

/// Where a session runs: its actor's jobs, and the plain closures it hands over (a write became
/// durable, an effect changed something), one at a time.
///
/// A server places each session on the event loop its requests arrive on, so a request runs the
/// session in place, with no thread switch (`NavigationSession.isolated(_:)`); whoever embeds the
/// engine elsewhere gets a serial queue per session (`SerialQueueExecutor`).
public protocol SessionExecutor: SerialExecutor {
    /// Whether the caller is running on this executor now, so it may use the session in place.
    var isCurrent: Bool { get }
    /// Runs `work` here after what is queued, never re-entrantly.
    func execute(_ work: @escaping @Sendable () -> Void)
}

/// A session executor of its own: a serial dispatch queue.
public final class SerialQueueExecutor: SessionExecutor, Sendable {
    private let queue: DispatchQueue
    private let onQueue = DispatchSpecificKey<Bool>()

    /// A queue of its own, named `label`.
    public init(label: String = "navd.session") {
        queue = DispatchQueue(label: label)
        queue.setSpecific(key: onQueue, value: true)
    }

    /// Whether the caller runs on this queue.
    public var isCurrent: Bool { DispatchQueue.getSpecific(key: onQueue) == true }

    /// Queues a job of the session.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async { job.runSynchronously(on: self.asUnownedSerialExecutor()) }
    }

    /// Queues `work` behind the session's jobs.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        queue.async(execute: work)
    }

    /// Traps unless the caller runs on this queue.
    public func checkIsolated() {
        precondition(isCurrent, "not on the session's queue")
    }

    /// Whether the caller runs on this queue.
    public func isIsolatingCurrentContext() -> Bool? {
        isCurrent
    }
}
