#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Work handed to loop executors from one thread, held back while that thread works through a
/// burst and then handed over: each run of work for one executor under one lock and at most one
/// wake-up of its loop, instead of one per piece. A store's writer answering a commit of forty
/// requests otherwise wakes a loop that starts draining while the next answers are still being
/// posted, and takes the loop's inbox lock forty times against it.
///
/// Only work is held back, never the loops' own messages (a stop, a connection): nothing waits
/// on a gathering. Runs are handed over in the order they were made, never one executor's work
/// all at once: a session's notice that a write is durable must reach its loop before the answer
/// reaches the loop the client waits on, wherever the two live. And where each run goes (the
/// loop, or the executor's own queue once the loop has stopped) is decided as it is handed over,
/// so an executor's work keeps its order even when its loop stops during the burst.
final class PostGathering {
    private var runs: [(executor: LoopExecutor, work: [LoopWork])] = []

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "no thread-specific key for gathering posts")
        return key
    }()

    /// The gathering open on the calling thread, if any.
    static var current: PostGathering? {
        guard let pointer = pthread_getspecific(key) else { return nil }
        return Unmanaged<PostGathering>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Runs `body` with work handed over from this thread gathered, then hands it over, in the
    /// order it came. Nested calls gather into the outermost.
    static func gathering<Result>(_ body: () throws -> Result) rethrows -> Result {
        if current != nil { return try body() }
        let gathering = PostGathering()
        pthread_setspecific(key, Unmanaged.passUnretained(gathering).toOpaque())
        // The deferred hand-over is its last use: it lives until then.
        defer {
            pthread_setspecific(key, nil)
            gathering.handOver()
        }
        return try body()
    }

    func add(_ work: LoopWork, for executor: LoopExecutor) {
        if let last = runs.indices.last, runs[last].executor === executor {
            runs[last].work.append(work)
        } else {
            runs.append((executor, [work]))
        }
    }

    private func handOver() {
        for run in runs { run.executor.submit(contentsOf: run.work) }
    }
}
