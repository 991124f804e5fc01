#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Messages posted from one thread to the loops, held back while that thread works through a
/// burst and then handed over together: one lock and at most one wake-up per loop for the whole
/// burst, instead of one per message. A store's writer answering a commit of forty requests
/// otherwise wakes a loop that starts draining while the next answers are still being posted,
/// and takes the loop's inbox lock forty times against it.
final class PostGathering {
    private var loops: [EventLoop] = []
    private var messages: [[LoopMessage]] = []

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

    /// Runs `body` with posts from this thread gathered, then hands each loop its share, in the
    /// order posted. Nested calls gather into the outermost.
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
        // A server has a loop per core: a scan beats hashing.
        if let index = loops.firstIndex(where: { $0 === loop }) {
            messages[index].append(message)
        } else {
            loops.append(loop)
            messages.append([message])
        }
    }

    private func handOver() {
        for (loop, messages) in zip(loops, messages) { loop.post(contentsOf: messages) }
    }
}
