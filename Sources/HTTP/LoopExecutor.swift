import Dispatch
import Synchronization

/// One event loop's thread as a place to run work, so that work can live where its requests
/// arrive: a serial executor for actors (a request handled on its actor's own loop needs no
/// thread switch, one from another loop costs one hop there), a task executor for tasks that
/// should not touch the cooperative pool, and a queue of plain closures.
///
/// It exists before its loop runs and outlives it: until the loop starts, and after it stops,
/// its work runs on a serial queue of its own, so an actor placed here is never stranded (the
/// sessions a server recovers before it listens, an effect that finishes after it stopped).
public final class LoopExecutor: SerialExecutor, TaskExecutor, Sendable {
    private enum Home {
        case beforeLoop
        case loop(EventLoop)
        case afterLoop
    }

    private let home = Mutex(Home.beforeLoop)
    /// The loop's thread while the loop runs it.
    private let loopThread = Atomic<UInt>(0)
    private let spare: DispatchQueue
    private let onSpare = DispatchSpecificKey<Bool>()

    /// An executor for a loop yet to start; `label` names its spare queue.
    public init(label: String = "navd.loop") {
        spare = DispatchQueue(label: label)
        spare.setSpecific(key: onSpare, value: true)
    }

    /// Whether the caller is running on this executor now, so it may run the executor's work
    /// in place.
    public var isCurrent: Bool {
        let thread = loopThread.load(ordering: .acquiring)
        if thread != 0 { return thread == currentThreadID() }
        return DispatchQueue.getSpecific(key: onSpare) == true
    }

    /// Queues a job of an actor or task placed here.
    public func enqueue(_ job: consuming ExecutorJob) {
        submit(.job(UnownedJob(job)))
    }

    /// Runs `work` on this executor after what is queued, one at a time with everything else
    /// here. Called on the loop itself, it runs before the loop next waits, never re-entrantly.
    public func execute(_ work: @escaping @Sendable () -> Void) {
        submit(.closure(work))
    }

    /// Runs `body`, holding back what it hands to any loop (work, answers) until it returns,
    /// then handing it over in order, what follows on for one loop at once: for a thread outside
    /// the loops that settles many requests in a burst, such as a store's writer answering a
    /// commit. Nothing inside may wait for the work it hands over: that work has not left yet.
    public static func gathering<Result>(_ body: () throws -> Result) rethrows -> Result {
        try PostGathering.gathering(body)
    }

    /// Traps unless the caller runs on this executor: what lets an actor placed here be used in
    /// place (`assumeIsolated`) by code the loop runs directly, such as a request's handler.
    public func checkIsolated() {
        precondition(isCurrent, "not on the event loop this work belongs to")
    }

    /// Whether the caller runs on this executor, asked before `checkIsolated` would trap.
    public func isIsolatingCurrentContext() -> Bool? {
        isCurrent
    }

    private func submit(_ work: LoopWork) {
        if let gathering = PostGathering.current {
            gathering.add(work, for: self)
            return
        }
        submit(contentsOf: CollectionOfOne(work))
    }

    /// Hands `work` over, in order: to the loop while it runs, to the spare queue before and
    /// after.
    func submit(contentsOf work: some Collection<LoopWork>) {
        let loop = home.withLock { home -> EventLoop? in
            guard case .loop(let loop) = home else {
                for piece in work { runOnSpare(piece) }
                return nil
            }
            return loop
        }
        // A loop that stops meanwhile hands this back through `runOnSpare`.
        loop?.post(contentsOf: work.lazy.map { .work($0) })
    }

    func run(_ work: LoopWork) {
        switch work {
        case .job(let job): job.runSynchronously(isolatedTo: asUnownedSerialExecutor(), taskExecutor: asUnownedTaskExecutor())
        case .closure(let closure): closure()
        }
    }

    /// Runs work the loop cannot: before it starts, after it stopped.
    func runOnSpare(_ work: LoopWork) {
        spare.async { self.run(work) }
    }

    /// The loop is about to start: from now on work queues there.
    func attach(_ loop: EventLoop) {
        home.withLock { $0 = .loop(loop) }
    }

    /// The loop starts (on its thread): it runs the work queued there once what was queued
    /// on the spare queue before has run.
    func enterLoop() {
        spare.sync {}
        loopThread.store(currentThreadID(), ordering: .releasing)
    }

    /// The loop stops (on its thread): work goes to the spare queue again, what the loop still
    /// held first; `handOver` passes that on, in order, and refuses posts from then on, which
    /// pass their work on too.
    func detach(handOver: () -> Void) {
        handOver()
        leaveLoop()
    }

    /// The loop is stopping with work still queued (on its thread, between two pieces of work):
    /// the rest goes to the spare queue, so a long queue of work cannot hold the loop up.
    func leaveLoop() {
        loopThread.store(0, ordering: .releasing)
        home.withLock { $0 = .afterLoop }
    }
}

/// What runs on a loop besides its connections: a job of an actor or task placed there, or a
/// closure.
enum LoopWork: Sendable {
    case job(UnownedJob)
    case closure(@Sendable () -> Void)
}
