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
    /// Submits `count` requests, the first alone and the rest while its commit is held up, so
    /// they share the next; `outcome` says how a commit of so many requests goes. Returns what
    /// happened, in order: commits, rounds, and the requests answered with success or with an
    /// unknown outcome.
    private func run(_ count: Int, outcome: @escaping @Sendable (Int) -> Result<[GroupCommit.Verdict], StorageError>) async -> [String] {
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
            return outcome(requests.count)
        }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let answered = Atomic<Int>(0)
            for request in 0..<count {
                commits.submit([.probe], admissible: { true }, completion: { result in
                    switch result {
                    case .success: log.withLock { $0.append("answer \(request)") }
                    case .failure(.outcomeUnknown): log.withLock { $0.append("unknown \(request)") }
                    case .failure: break
                    }
                    if answered.add(1, ordering: .relaxed).newValue == count { done.resume() }
                }, commitTogether: committer)
                if request == 0 {
                    while !firstStarted.load(ordering: .acquiring) { usleep(1_000) }
                }
            }
            releaseFirst.store(true, ordering: .releasing)
        }
        commits.close()
        return log.withLock { $0 }
    }

    @Test func requestsWaitingBehindACommitShareTheNextAndAreAnsweredInOneRound() async {
        let log = await run(5) { .success(Array(repeating: .written, count: $0)) }
        #expect(log == [
            "commit of 1", "round begins", "answer 0", "round ends",
            "commit of 4", "round begins", "answer 1", "answer 2", "answer 3", "answer 4", "round ends",
        ])
    }

    /// A commit that fails is tried again a request at a time; each is answered as its own
    /// commit ends, in a round of its own, not after every other request's.
    @Test func afterAFailedBatchEachRequestIsAnsweredAsItsOwnCommitEnds() async {
        // A batch of several fails (one bad write among them); alone, each is written.
        let log = await run(3) { $0 > 1 ? .failure(.unavailable("one bad write")) : .success([.written]) }
        #expect(log == [
            "commit of 1", "round begins", "answer 0", "round ends",
            "commit of 2",
            "commit of 1", "round begins", "answer 1", "round ends",
            "commit of 1", "round begins", "answer 2", "round ends",
        ])
    }

    /// A batch whose commit may have happened (its connection lost mid-commit, the outcome
    /// unknown) is never tried again request by request: written again, each would be stored
    /// twice. Every request of it is answered with that failure, in one round.
    @Test func aBatchOfUnknownOutcomeIsNotWrittenAgain() async {
        let log = await run(3) { $0 > 1 ? .failure(.outcomeUnknown("cut off while committing")) : .success([.written]) }
        #expect(log == [
            "commit of 1", "round begins", "answer 0", "round ends",
            "commit of 2", "round begins", "unknown 1", "unknown 2", "round ends",
        ])
    }

    /// A batch the store never answered (a database that stopped answering) is not tried again
    /// request by request either: each would wait as long again. Every request of it gets the
    /// failure, in one round.
    @Test func aBatchTheStoreNeverAnsweredIsNotTriedRequestByRequest() async {
        let log = await run(3) { $0 > 1 ? .failure(.unreachable("no answer within the deadline")) : .success([.written]) }
        #expect(log == [
            "commit of 1", "round begins", "answer 0", "round ends",
            "commit of 2", "round begins", "round ends",
        ])
    }

    /// Tried request by request after a failed batch, a request the store does not answer stops
    /// the tries: every request after it gets that failure unasked, rather than waiting as long.
    @Test func requestByRequestStopsAtTheFirstTheStoreDoesNotAnswer() async {
        let calls = Atomic<Int>(0)
        let log = await run(4) { count in
            switch calls.add(1, ordering: .relaxed).newValue {
            case 1: .success(Array(repeating: .written, count: count))
            case 2: .failure(.unavailable("one bad write"))
            default: .failure(.unreachable("no answer within the deadline"))
            }
        }
        #expect(log == [
            "commit of 1", "round begins", "answer 0", "round ends",
            "commit of 3",
            "commit of 1", "round begins", "round ends",
            "round begins", "round ends",
            "round begins", "round ends",
        ])
        #expect(calls.load(ordering: .relaxed) == 3, "two requests were never tried")
    }

    /// `runningFor` says how long the commit running now has taken, and nothing between commits:
    /// what readiness reads to tell a stalled store from a quiet one.
    @Test func runningForIsTheAgeOfTheCommitInProgress() async {
        let commits = GroupCommit(label: "test.writer")
        #expect(commits.runningFor == nil, "no commit yet")
        let started = Atomic<Bool>(false)
        let release = Atomic<Bool>(false)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            commits.submit([.probe], admissible: { true }, completion: { _ in done.resume() }, commitTogether: { requests in
                started.store(true, ordering: .releasing)
                while !release.load(ordering: .acquiring) { usleep(1_000) }
                return .success(requests.map { _ in .written })
            })
            while !started.load(ordering: .acquiring) { usleep(1_000) }
            usleep(50_000)
            let running = commits.runningFor
            #expect(running.map { $0 >= .milliseconds(50) && $0 < .seconds(5) } == true, "\(String(describing: running))")
            release.store(true, ordering: .releasing)
        }
        commits.close()
        #expect(commits.runningFor == nil, "none after it")
    }
}
