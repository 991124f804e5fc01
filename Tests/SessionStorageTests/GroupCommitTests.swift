#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import SessionStorage
import Synchronization
import Testing

/// Requests that arrive while a commit syncs go together into the next one, and that commit's
/// completions run as one round, in the order the requests came.
@Suite struct GroupCommitTests {
    @Test func requestsWaitingBehindACommitShareTheNextAndAreAnsweredInOneRound() async {
        let log = Mutex<[String]>([])
        let firstStarted = Atomic<Bool>(false)
        let releaseFirst = Atomic<Bool>(false)
        let commits = GroupCommit(label: "test.writer") { completions in
            log.withLock { $0.append("round begins") }
            completions()
            log.withLock { $0.append("round ends") }
        }
        let committer: GroupCommit.Committer = { requests in
            log.withLock { $0.append("commit of \(requests.count)") }
            firstStarted.store(true, ordering: .releasing)
            // The first commit syncs until the others are queued.
            while !releaseFirst.load(ordering: .acquiring) { usleep(1_000) }
            return .success(Array(repeating: true, count: requests.count))
        }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let answered = Atomic<Int>(0)
            for request in 0..<5 {
                commits.submit([.probe], admissible: { true }, completion: { result in
                    if case .success = result { log.withLock { $0.append("answer \(request)") } }
                    if answered.add(1, ordering: .relaxed).newValue == 5 { done.resume() }
                }, commitTogether: committer)
                if request == 0 {
                    while !firstStarted.load(ordering: .acquiring) { usleep(1_000) }
                }
            }
            releaseFirst.store(true, ordering: .releasing)
        }
        commits.close()
        #expect(log.withLock { $0 } == [
            "commit of 1", "round begins", "answer 0", "round ends",
            "commit of 4", "round begins", "answer 1", "answer 2", "answer 3", "answer 4", "round ends",
        ])
    }

    /// A commit that fails is tried again a request at a time; each is answered as its own
    /// commit ends, in a round of its own, not after every other request's.
    @Test func afterAFailedBatchEachRequestIsAnsweredAsItsOwnCommitEnds() async {
        let log = Mutex<[String]>([])
        let firstStarted = Atomic<Bool>(false)
        let releaseFirst = Atomic<Bool>(false)
        let commits = GroupCommit(label: "test.writer") { completions in
            log.withLock { $0.append("round begins") }
            completions()
            log.withLock { $0.append("round ends") }
        }
        // A batch of several fails (one bad write among them); alone, each is written.
        let committer: GroupCommit.Committer = { requests in
            log.withLock { $0.append("commit of \(requests.count)") }
            firstStarted.store(true, ordering: .releasing)
            while !releaseFirst.load(ordering: .acquiring) { usleep(1_000) }
            return requests.count > 1 ? .failure(.unavailable("one bad write")) : .success([true])
        }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let answered = Atomic<Int>(0)
            for request in 0..<3 {
                commits.submit([.probe], admissible: { true }, completion: { result in
                    if case .success = result { log.withLock { $0.append("answer \(request)") } }
                    if answered.add(1, ordering: .relaxed).newValue == 3 { done.resume() }
                }, commitTogether: committer)
                if request == 0 {
                    while !firstStarted.load(ordering: .acquiring) { usleep(1_000) }
                }
            }
            releaseFirst.store(true, ordering: .releasing)
        }
        commits.close()
        #expect(log.withLock { $0 } == [
            "commit of 1", "round begins", "answer 0", "round ends",
            "commit of 2",
            "commit of 1", "round begins", "answer 1", "round ends",
            "commit of 1", "round begins", "answer 2", "round ends",
        ])
    }
}
