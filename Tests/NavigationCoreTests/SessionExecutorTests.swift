import NavigationCore
import Observation
import Synchronization
import Testing

@Observable private final class Tally {
    var count = 0
}

/// A session runs on the executor it is given: a request already there uses it in place, with no
/// hop; one from elsewhere runs there after what is queued.
@Suite struct SessionExecutorTests {
    private func session(on executor: SerialQueueExecutor) throws -> NavigationSession {
        let tally = Screen<Tally>("tally", make: { Tally() }) {
            Field("count", \.count)
            Action.sync("increment") { $0.count += 1 }
        }
        return try FeatureCatalog(hosting: [.init(tally)]).makeSession(feature: "tally", state: nil, executor: executor)
    }

    @Test func onItsExecutorTheSessionIsUsedInPlace() async throws {
        let executor = SerialQueueExecutor()
        let session = try session(on: executor)
        let inPlace = await withCheckedContinuation { (done: CheckedContinuation<Bool, Never>) in
            executor.execute {
                let ran = Atomic<Bool>(false)
                session.isolated { session in
                    _ = try? session.perform(target: "root", action: "increment", arguments: nil)
                    ran.store(true, ordering: .relaxed)
                }
                // Already done when `isolated` returns: no task, no hop.
                done.resume(returning: ran.load(ordering: .relaxed))
            }
        }
        #expect(inPlace)
        #expect(await session.describe().state["count"] == 1)
    }

    @Test func fromElsewhereItRunsOnTheSessionsExecutor() async throws {
        let executor = SerialQueueExecutor()
        let session = try session(on: executor)
        #expect(!executor.isCurrent)
        let (onExecutor, version) = await withCheckedContinuation { (done: CheckedContinuation<(Bool, Int), Never>) in
            session.isolated { session in
                let outcome = try? session.perform(target: "root", action: "increment", arguments: nil)
                done.resume(returning: (executor.isCurrent, outcome?.version ?? -1))
            }
        }
        #expect(onExecutor)
        #expect(version == 1)
    }

    @Test func withoutAJournalAChangeIsDurableAtOnce() async throws {
        let session = try session(on: SerialQueueExecutor())
        let answered = await withCheckedContinuation { (done: CheckedContinuation<Int, Never>) in
            session.isolated { session in
                guard let outcome = try? session.perform(target: "root", action: "increment", arguments: nil) else {
                    return done.resume(returning: -1)
                }
                let called = Atomic<Int>(-1)
                session.whenDurable(outcome, on: session.executor) { called.store((try? $0.get().version) ?? -2, ordering: .relaxed) }
                done.resume(returning: called.load(ordering: .relaxed))
            }
        }
        #expect(answered == 1)
    }
}
