#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Messages posted from one thread to the loops, held back while that thread works through a
/// burst and then handed over: each run of messages for one loop in one lock and at most one
/// wake-up, instead of one per message. A store's writer answering a commit of forty requests
/// otherwise wakes a loop that starts draining while the next answers are still being posted,
/// and takes the loop's inbox lock forty times against it.
///
/// Runs are handed over in the order they were posted, never one loop's messages all at once:
/// a session's notice that a write is durable must reach its loop before the answer to the
/// request reaches the loop the client waits on, wherever the two live.
final class PostGathering {
    private var runs: [(loop: EventLoop, messages: [LoopMessage])] = []

    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        pthread_key_create(&key, nil)
        return key
    }()

    /// The gathering open on the calling thread, if any.
    static var current: PostGathering? {
        guard let pointer = pthread_getspecific(key) else { return nil }
        return Unmanaged<PostGathering>.fromOpaque(pointer).takeUnretainedValue()
    }

    /// Runs `body` with posts from this thread gathered, then hands them over, in the order
    /// posted. Nested calls gather into the outermost.
    static func gathering<Result>(_ body: () throws -> Result) rethrows -> Result {
        if current != nil { return try body() }
        let gathering = PostGathering()
        pthread_setspecific(key, Unmanaged.passUnretained(gathering).toOpaque())
        defer {
            pthread_setspecific(key, nil)
            gathering.handOver()
        }
        return try withExtendedLifetime(gathering) { try body() }
    }

    func add(_ message: LoopMessage, for loop: EventLoop) {
        if let last = runs.indices.last, runs[last].loop === loop {
            runs[last].messages.append(message)
        } else {
            runs.append((loop, [message]))
        }
    }

    private func handOver() {
        for run in runs { run.loop.post(contentsOf: run.messages) }
    }
}
