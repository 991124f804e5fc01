import Dispatch
import Features
@testable import NavigationCore
import Synchronization
import Testing
import TestSupport

/// A journal kept in memory, so the engine's side of durability can be tested on its own: it
/// can refuse writes (a full disk) or hold them (a slow disk).
final class MemoryJournal: SessionJournal {
    enum Mode { case accept, refuse, hold }
    private struct State {
        var entries: [JournalEntry] = []
        var mode = Mode.accept
        var held: [([JournalEntry], @Sendable (Bool) -> Void)] = []
    }
    private let state = Mutex(State())

    var entries: [JournalEntry] { state.withLock { $0.entries } }
    func set(_ mode: Mode) { state.withLock { $0.mode = mode } }

    func write(_ entries: [JournalEntry], generation: Int, completion: @escaping @Sendable (Bool) -> Void) {
        let accepted: Bool? = state.withLock { state in
            switch state.mode {
            case .accept: state.entries += entries; return true
            case .refuse: return false
            case .hold: state.held.append((entries, completion)); return nil
            }
        }
        if let accepted { completion(accepted) }
    }

    /// Completes the held writes as `success` says.
    func release(success: Bool) {
        let held = state.withLock { state in
            defer { state.held = []; state.mode = .accept }
            if success { state.entries += state.held.flatMap(\.0) }
            return state.held
        }
        for (_, completion) in held { completion(success) }
    }

    var heldCount: Int { state.withLock { $0.held.count } }

    var takesWrites: Bool { state.withLock { $0.mode != .refuse } }

    /// Completes one held write, leaving the others held (completions can come in any order).
    func complete(_ index: Int, success: Bool) {
        let completion = state.withLock { state in
            if success { state.entries += state.held[index].0 }
            return state.held[index].1
        }
        completion(success)
    }

    /// The session as a restart would find it: the last snapshot and the entries after it.
    func restored(from first: DurableSession) throws -> DurableSession {
        let all = entries
        let start = all.lastIndex { $0.snapshot != nil }
        let base = start.flatMap { all[$0].snapshot } ?? first
        return try base.applying(Array(all[(start.map { $0 + 1 } ?? 0)...]))
    }
}

@Suite struct DurabilityTests {
    /// A durable counter session whose journal holds every write until the test settles it.
    private func heldCounter() async throws -> (Harness, MemoryJournal) {
        let harness = try await Harness("counter")
        let journal = MemoryJournal()
        _ = await harness.session.makeDurable(journal: journal)
        journal.set(.hold)
        return (harness, journal)
    }

    private func settle(_ session: NavigationSession) async throws {
        for _ in 0..<2500 where await session.pendingWrites > 0 { try await Task.sleep(for: .milliseconds(2)) }
        #expect(await session.pendingWrites == 0)
    }

    @Test(arguments: [("app", UInt64(11)), ("wifi", 12), ("gallery", 13), ("counter", 14)])
    func aSessionRestoredFromItsJournalIsTheSameSession(_ feature: String, _ seed: UInt64) async throws {
        var harness = try await Harness(feature)
        let journal = MemoryJournal()
        let first = await harness.session.makeDurable(journal: journal)
        let features = harness.catalog.description["features"]?.arrayValue ?? []
        var random = SplitMix64(seed: seed)
        for step in 1...600 {
            try? await InvariantPropertyTests.randomStep(harness, features: features, random: &random)
            guard step % 50 == 0 else { continue }
            try await settle(harness.session)
            try await harness.sync()
            let stored = try journal.restored(from: first)
            let live = await harness.session.describe()
            #expect(stored.version == live.version)
            #expect(stored.state == live.state)
            // The patches were made from kept encodings: held to the state encoded afresh.
            #expect(stored.state == (await harness.session.stateEncodedBothWays().fresh))
            #expect(stored.navigation == live.navigation)
            let events = journal.entries.flatMap(\.events)
            let restored = try harness.catalog.restoreSession(feature: feature, stored, events: events, journal: MemoryJournal())
            let again = await restored.describe()
            #expect(again.version == live.version && again.state == live.state && again.navigation == live.navigation)
            #expect(await restored.serialCounter == harness.session.serialCounter)
            // Resuming from a recent id works on the restored session as on the live one.
            if let last = events.last?.sequence, last > 3 {
                guard case .resume(let missed) = await restored.attach(after: last - 3, { start, _ in start }) else {
                    Issue.record("expected a resume after a restore")
                    continue
                }
                #expect(missed.map(\.sequence) == Array((last - 2)...last))
            }
        }
        // Snapshots keep what a restart replays short.
        #expect(journal.entries.contains { $0.snapshot != nil })
    }

    /// What the journal held since its snapshot counts toward the next one after a restart, so a
    /// session that changes a little in each of many runs still gets snapshots (and its journal
    /// is trimmed) instead of growing until a restart can no longer replay it.
    @Test func aRestoredSessionCountsWhatItsJournalHeldTowardTheNextSnapshot() async throws {
        let harness = try await Harness("counter")
        let journal = MemoryJournal()
        let first = await harness.session.makeDurable(journal: journal)
        for _ in 0..<60 {
            _ = try await harness.session.durable(try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil))
        }
        #expect(journal.entries.count == 60 && journal.entries.allSatisfy { $0.snapshot == nil })
        let next = MemoryJournal()
        let restored = try harness.catalog.restoreSession(feature: "counter", first, replaying: journal.entries,
                                                          events: journal.entries.flatMap(\.events), journal: next)
        #expect(await restored.describe().state["count"] == 60)
        for _ in 0..<4 { _ = try await restored.durable(try await restored.perform(target: "root", action: "incrementButtonTapped", arguments: nil)) }
        #expect(next.entries.map { $0.snapshot != nil } == [false, false, false, true], "64 batches since the snapshot, across the restart")
    }

    /// Events take a snapshot by bytes too: a few large batches (long text) must not outgrow the
    /// buffer's bytes before one, or the store could keep a transaction without its events.
    @Test func largeEventsTakeASnapshotBeforeTheyOutgrowTheBuffersBytes() async throws {
        let catalog = FeatureSet.catalog(Harness.dependencies())
        var limits = SessionLimits()
        limits.eventBufferBytes = 4000
        let session = try catalog.makeSession(feature: "counter", state: nil, limits: limits)
        let journal = MemoryJournal()
        _ = await session.makeDurable(journal: journal)
        let text = String(repeating: "x", count: 1000)
        for round in 0..<6 {
            let state: JSON = ["count": .int(round), "destination": ["fact": ["value": .string(text + String(round))]]]
            _ = try await session.durable(try await session.replaceState(state))
        }
        var bytes = 0
        for entry in journal.entries {
            bytes = entry.snapshot == nil ? bytes + entry.events.reduce(0) { $0 + $1.encodedData.count } : 0
            #expect(bytes * 2 <= limits.eventBufferBytes + 2 * 1100, "never far past half the buffer's bytes without a snapshot")
        }
        #expect(journal.entries.contains { $0.snapshot != nil })
    }

    /// What a session keeps for a rollback (the entries since its last snapshot) stays within
    /// about its state's size: a large state replaced again and again takes a snapshot once the
    /// patches and events since the last one outgrow the state, not only once the events fill
    /// half the event buffer (megabytes no memory budget counts).
    @Test func aJournalThatOutgrowsItsStateTakesASnapshot() async throws {
        let catalog = FeatureSet.catalog(Harness.dependencies())
        var limits = SessionLimits()
        limits.maxStringBytes = 1 << 20
        let session = try catalog.makeSession(feature: "counter", state: nil, limits: limits)
        let journal = MemoryJournal()
        _ = await session.makeDurable(journal: journal)
        let size = 200_000
        for round in 0..<12 {
            let text = String(repeating: Character(Unicode.Scalar(UInt8(ascii: "a") + UInt8(round))), count: size)
            let state: JSON = ["count": .int(round), "destination": ["fact": ["value": .string(text)]]]
            _ = try await session.durable(try await session.replaceState(state))
        }
        var bytes = 0
        for entry in journal.entries {
            guard entry.snapshot == nil else { bytes = 0; continue }
            bytes += entry.events.reduce(0) { $0 + $1.encodedData.count } + JSONWriter.size(entry.statePatch)
            // The state, then one more batch: its event and its patch, each about the text.
            #expect(bytes <= 3 * (size + 1000), "the journal since the snapshot stays within about the state's size")
        }
        #expect(journal.entries.filter { $0.snapshot != nil }.count >= 4)
    }

    /// A record only corruption could give is refused at restore, so that session is skipped
    /// (logged, counted) instead of trapping the server at its next change: counters that
    /// would overflow, or a counter under ids already on screen, which would repeat them.
    @Test func aRecordWhoseCountersCannotBeRightIsRefused() async throws {
        let harness = try await Harness("app")
        for _ in 0..<3 { _ = try await harness.session.perform(target: "root", action: "counterButtonTapped", arguments: nil) }
        let good = await harness.session.makeDurable(journal: MemoryJournal())
        func restore(_ change: (inout DurableSession) -> Void) -> String? {
            var stored = good
            change(&stored)
            do {
                _ = try harness.catalog.restoreSession(feature: "app", stored, events: [], journal: MemoryJournal())
                return nil
            } catch {
                return error.description
            }
        }
        #expect(restore { _ in } == nil)
        #expect(restore { $0.version = .max }?.contains("version") == true)
        #expect(restore { $0.lastSequence = .max - 1 }?.contains("last event id") == true)
        #expect(restore { $0.nextSerial = .max }?.contains("next id") == true)
        #expect(restore { $0.nextSerial = -1 } != nil)
        #expect(restore { $0.nextSerial -= 1 }?.contains("disagree") == true, "the newest element's id would be handed out again")
    }

    /// A journal with a row lost or edited is refused at restore (the session skipped, logged,
    /// counted): replayed, a repeated id would reach clients twice, and a gap would let a resume
    /// pass over what its client missed.
    @Test func aJournalWithAGapOrARepeatedIdIsRefused() async throws {
        let harness = try await Harness("counter")
        let journal = MemoryJournal()
        let first = await harness.session.makeDurable(journal: journal)
        for action in ["incrementButtonTapped", "settingsButtonTapped", "incrementButtonTapped"] {
            _ = try await harness.session.durable(try await harness.session.perform(target: "root", action: action, arguments: nil))
        }
        let entries = journal.entries
        try #require(entries.count == 3 && entries.allSatisfy { $0.snapshot == nil && !$0.events.isEmpty })
        func renumbered(_ entry: JournalEntry, _ sequence: (NavigationEvent) -> Int) -> JournalEntry {
            JournalEntry(version: entry.version, lastSequence: entry.lastSequence, nextSerial: entry.nextSerial,
                         events: entry.events.map { NavigationEvent(sequence: sequence($0), kind: $0.kind, data: $0.data) },
                         statePatch: entry.statePatch, snapshot: nil)
        }
        func restore(_ entries: [JournalEntry], kept: [NavigationEvent]? = nil) -> String? {
            do {
                _ = try harness.catalog.restoreSession(feature: "counter", first, replaying: entries,
                                                       events: kept ?? entries.flatMap(\.events), journal: MemoryJournal())
                return nil
            } catch {
                return error.description
            }
        }
        #expect(restore(entries) == nil)
        #expect(restore([entries[0], entries[2]])?.contains("follows version") == true, "a lost row")
        let repeated = entries[1].events[0].sequence
        #expect(restore([entries[0], entries[1], renumbered(entries[2]) { _ in repeated }])?.contains("in order") == true)
        #expect(restore([entries[0], renumbered(entries[1]) { $0.sequence + 1 }, entries[2]]) != nil, "an id skipped")
        let events = entries.flatMap(\.events)
        #expect(restore(entries, kept: Array(events.dropLast()))?.contains("unbroken") == true, "kept events that stop short")
        var gap = events
        gap.remove(at: 1)
        #expect(restore(entries, kept: gap)?.contains("unbroken") == true, "kept events with one missing")
        #expect(restore(entries, kept: Array(events.suffix(1))) == nil, "the newest events alone are a buffer that was trimmed")
    }
    @Test func aRestoredSessionNeverReusesAnId() async throws {
        let harness = try await Harness("app")
        let journal = MemoryJournal()
        let first = await harness.session.makeDurable(journal: journal)
        for _ in 0..<3 { _ = try await harness.session.durable(try await harness.session.perform(target: "root", action: "counterButtonTapped", arguments: nil)) }
        let stack = await harness.elements().stack
        _ = try await harness.session.durable(try await harness.session.pop(stack: stack, .count(2)))
        let used = Set(journal.entries.flatMap(\.events).compactMap { $0.data["id"]?.stringValue })
        let lastStored = journal.entries.last?.lastSequence ?? 0
        let restored = try harness.catalog.restoreSession(feature: "app", try journal.restored(from: first), events: [], journal: journal)
        let pushed = try await restored.perform(target: "root", action: "counterButtonTapped", arguments: nil)
        let id = try #require(pushed.events.first?.data["id"]?.stringValue)
        #expect(!used.contains(id))
        #expect(pushed.events.first?.sequence == lastStored + 1)
    }

    /// A fact that never comes: the fetch is still running when the process dies.
    struct StalledFacts: FactClient {
        func fact(about number: Int) async throws(FactError) -> String {
            try? await Task.sleep(for: .seconds(600))
            return "late"
        }
    }

    @Test func effectsRunningAtACrashSettleOnRecoveryAsIfCancelled() async throws {
        let harness = try await Harness("counter", dependencies: Harness.dependencies(facts: StalledFacts()))
        let journal = MemoryJournal()
        let first = await harness.session.makeDurable(journal: journal)
        _ = try await harness.session.durable(try await harness.session.perform(target: "root", action: "factButtonTapped", arguments: nil))
        let crashed = try journal.restored(from: first)
        #expect(crashed.state["factIsLoading"] == true, "the journal holds the spinner of a fetch in flight")

        let restoredJournal = MemoryJournal()
        let restored = try harness.catalog.restoreSession(feature: "counter", crashed, events: [], journal: restoredJournal)
        let settled = try await restored.durable(try await restored.settleEffects())
        #expect(settled.version == crashed.version + 1)
        #expect(settled.events.map(\.kind) == [.state])
        #expect(settled.events.first?.data["changes"]?["factIsLoading"] == false)
        #expect(settled.events.first?.sequence == crashed.lastSequence + 1)
        #expect(restoredJournal.entries.count == 1, "the settled state is durable too")
        #expect(await restored.describe().state["factIsLoading"] == false)

        // Nothing was in flight: settling changes nothing and costs no version.
        let again = try await restored.settleEffects()
        #expect(again.events.isEmpty && again.version == settled.version)
        await harness.session.end(.deleted)
    }

    /// A self-dismissing alert up at a crash: its timer is gone with the process, so the restored
    /// session re-arms it with the time it had left, and an alert already past due goes at once,
    /// in the settling batch.
    @Test(arguments: [(0.4, false), (20.0, true)])
    func aTimedAlertsTimerIsReArmedWithTheTimeItHadLeft(_ elapsed: Double, _ pastDue: Bool) async throws {
        let now = Mutex(1_000.0)
        func dependencies(delay: Duration) -> FeatureDependencies {
            FeatureDependencies(factClient: InstantFacts(), alertDismissDelay: delay, wallClock: { now.withLock { $0 } })
        }
        let harness = try await Harness("gallery", dependencies: dependencies(delay: .seconds(10)))
        let journal = MemoryJournal()
        let first = await harness.session.makeDurable(journal: journal)
        _ = try await harness.session.durable(try await harness.session.perform(target: "root", action: "timedAlertButtonTapped", arguments: nil))
        let crashed = try journal.restored(from: first)
        #expect(crashed.state["timedAlert"]?["dismissesAt"] == .double(1_010) || crashed.state["timedAlert"]?["dismissesAt"] == .int(1_010))

        // The process is gone for `elapsed` of the alert's 10 s; the new process knows only
        // what is durable, and a wall clock that moved on.
        now.withLock { $0 = pastDue ? 1_010 + elapsed : 1_010 - elapsed }
        let catalog = FeatureSet.catalog(dependencies(delay: .seconds(10)))
        let restored = try catalog.restoreSession(feature: "gallery", crashed, events: [], journal: MemoryJournal())
        let settled = try await restored.settleEffects()
        #expect(settled.events.map(\.kind) == (pastDue ? [.dismiss] : []), "the alert stays up while it has time left")
        let started = ContinuousClock.now
        var presented = true
        while presented && ContinuousClock.now - started < .seconds(5) {
            try await Task.sleep(for: .milliseconds(20))
            presented = await restored.navigation()["presentations"]?.arrayValue?.isEmpty == false
        }
        #expect(!presented, "the re-armed timer dismissed the alert")
        // Not the 10 s of a fresh timer: the time it had left (with slack for a busy machine).
        #expect(ContinuousClock.now - started < .seconds(5))
        #expect(await restored.describe().state["timedAlert"] == .null)
        await harness.session.end(.deleted)
        await restored.end(.deleted)
    }

    /// The write fails before the request even asks whether its change is durable: it must be
    /// refused, not left waiting for an event id that the rollback hands to the next change.
    @Test func aChangeRolledBackBeforeItsRequestWaitsIsRefusedAtOnce() async throws {
        let (harness, journal) = try await heldCounter()
        let undone = try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        journal.release(success: false)
        for _ in 0..<2500 where await harness.session.pendingWrites > 0 { try await Task.sleep(for: .milliseconds(2)) }
        let next = try await harness.session.perform(target: "root", action: "decrementButtonTapped", arguments: nil)
        #expect(next.events.first?.sequence == undone.events.first?.sequence, "the rolled-back id is issued again")
        let session = harness.session
        let answer = Task { () -> Bool in
            do { _ = try await session.durable(undone); return true } catch { return false }
        }
        let timeout = Task {
            try await Task.sleep(for: .seconds(2))
            answer.cancel()
        }
        #expect(await answer.value == false, "refused, not answered 200 with the next change's durability")
        timeout.cancel()
        #expect(try await session.durable(next).version == 1)
        #expect(await session.describe().state["count"] == -1)
    }

    /// What an answer registered for, as it arrived: the version or the error, and whether it
    /// ran on the executor it asked for.
    private final class Answers: Sendable {
        let executor = SerialQueueExecutor(label: "answers")
        private let arrived = Mutex<[(Result<Int, NavigationError>, onExecutor: Bool)]>([])
        var all: [(Result<Int, NavigationError>, onExecutor: Bool)] { arrived.withLock { $0 } }

        func register(_ outcome: NavigationSession.Outcome, on session: NavigationSession) async {
            await session.whenDurable(outcome, on: executor) { [self] result in
                arrived.withLock { $0.append((result.map(\.version), executor.isCurrent)) }
            }
        }

        func wait(for count: Int) async throws {
            for _ in 0..<2500 where all.count < count { try await Task.sleep(for: .milliseconds(2)) }
        }
    }

    /// An answer comes from the store's notice of the write that carries its change, on the
    /// executor it asked for, while the session's own executor is busy: a commit's answers do
    /// not wait for the session's turn. The session catches up after.
    @Test func anAnswerComesFromTheWritesNoticeWithoutTheSessionsTurn() async throws {
        let (harness, journal) = try await heldCounter()
        let outcome = try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        let answers = Answers()
        await answers.register(outcome, on: harness.session)
        try await Task.sleep(for: .milliseconds(20))
        #expect(answers.all.isEmpty, "not answered before the write is durable")

        let busy = DispatchSemaphore(value: 0)
        harness.session.executor.execute { busy.wait() }
        journal.release(success: true)
        try await answers.wait(for: 1)
        let answered = answers.all
        busy.signal()
        #expect(answered.count == 1)
        #expect((try? answered.first?.0.get()) == 1)
        #expect(answered.first?.onExecutor == true)
        try await settle(harness.session)
        #expect(harness.collector.take().joined().map(\.sequence) == [1], "published once the session had its turn")
    }

    /// A write the store refuses answers its request with `storageUnavailable`, from the notice
    /// too, and the session rolls back; an answer asked for after the rollback is refused at once.
    @Test func aRefusedWriteAnswersStorageUnavailableAndAnswersAfterTheRollbackAreRefused() async throws {
        let (harness, journal) = try await heldCounter()
        let outcome = try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        let answers = Answers()
        await answers.register(outcome, on: harness.session)
        journal.release(success: false)
        try await answers.wait(for: 1)
        try await settle(harness.session)
        await answers.register(outcome, on: harness.session)
        try await answers.wait(for: 2)
        let answered = answers.all
        #expect(answered.count == 2)
        for (result, onExecutor) in answered {
            #expect(throws: NavigationError.storageUnavailable) { try result.get() }
            #expect(onExecutor)
        }
        #expect(await harness.session.describe().state["count"] == 0)
    }

    /// Two batches in flight: each request is answered by its own write's notice. A later
    /// write's success says the earlier ones are durable too (the journal's contract), so its
    /// request need not wait for theirs; an answer asked for once the write is settled comes
    /// at once.
    @Test func eachRequestIsAnsweredByItsOwnWritesNotice() async throws {
        let (harness, journal) = try await heldCounter()
        let first = try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        let second = try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        let answers = Answers()
        await answers.register(second, on: harness.session)
        await answers.register(first, on: harness.session)
        #expect(journal.heldCount == 2)
        journal.complete(1, success: true)
        try await answers.wait(for: 1)
        #expect(answers.all.compactMap { try? $0.0.get() } == [2])
        journal.complete(0, success: true)
        try await answers.wait(for: 2)
        #expect(answers.all.compactMap { try? $0.0.get() } == [2, 1])
        try await settle(harness.session)
        await answers.register(first, on: harness.session)
        try await answers.wait(for: 3)
        #expect(answers.all.compactMap { try? $0.0.get() } == [2, 1, 1])
    }

    @Test func eventsArePublishedAndAnsweredOnlyOnceDurable() async throws {
        let (harness, journal) = try await heldCounter()
        let outcome = try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        let session = harness.session
        let answered = Task { try await session.durable(outcome) }
        try await Task.sleep(for: .milliseconds(50))
        #expect(harness.collector.take().isEmpty, "nothing published before the write is durable")
        journal.release(success: true)
        #expect(try await answered.value.version == 1)
        try await Task.sleep(for: .milliseconds(20))
        #expect(harness.collector.take().joined().map(\.sequence) == [1])
    }

    /// Found by scripts/crash-test.sh: a tab opened while a batch was on its way to disk got a
    /// snapshot showing it, with its id; a kill then lost the batch and the restarted session
    /// issued that id again for other events.
    @Test func aFreshStreamsSnapshotShowsOnlyWhatIsDurable() async throws {
        let harness = try await Harness("counter")
        let journal = MemoryJournal()
        let first = await harness.session.makeDurable(journal: journal)
        _ = try await harness.session.durable(try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil))
        journal.set(.hold)
        _ = try await harness.session.perform(target: "root", action: "settingsButtonTapped", arguments: nil)

        let (start, through) = await harness.session.attach(after: nil) { start, through in (start, through) }
        guard case .snapshot(let snapshot) = start else {
            Issue.record("a fresh stream starts with a snapshot, not \(start)")
            return
        }
        #expect(snapshot.sequence == 1 && through == 1, "the snapshot's id is the last durable one")
        #expect(snapshot.data["version"]?.intValue == 1)
        let durableTree = try #require(snapshot.data["navigation"])
        #expect(durableTree["state"]?["count"]?.intValue == 1)
        #expect(durableTree["presentations"]?.arrayValue?.isEmpty == true, "the settings screen is not durable yet")

        // A kill now loses the held batch; the restarted session is what the snapshot showed, and
        // the ids after it are free, since nobody was shown them.
        let restored = try harness.catalog.restoreSession(feature: "counter", try journal.restored(from: first),
                                                          events: journal.entries.flatMap(\.events), journal: MemoryJournal())
        #expect(await restored.navigation() == durableTree)
        let next = try await restored.perform(target: "root", action: "decrementButtonTapped", arguments: nil)
        #expect(next.events.first?.sequence == 2)

        // Without a kill, the subscriber gets the batch once it is durable, after its snapshot.
        journal.release(success: true)
        try await settle(harness.session)
        #expect(harness.collector.take().joined().map(\.sequence) == [1, 2])
        let (later, _) = await harness.session.attach(after: nil) { start, through in (start, through) }
        guard case .snapshot(let current) = later else {
            Issue.record("expected a snapshot")
            return
        }
        let tree = await harness.session.navigation()
        #expect(current.sequence == 2 && current.data["navigation"] == tree)
    }

    /// Batches go to the journal as they are made, without waiting for the session's previous
    /// write; whatever order the journal answers in, they take effect in the order made.
    @Test func writesArePipelinedAndTakeEffectInTheOrderMade() async throws {
        let (harness, journal) = try await heldCounter()
        let first = try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        let second = try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        #expect(journal.heldCount == 2, "the second batch did not wait for the first write")

        journal.complete(1, success: true)
        try await Task.sleep(for: .milliseconds(50))
        #expect(harness.collector.take().isEmpty, "the second batch is not published before the first is durable")
        #expect(await harness.session.pendingWrites == 2)

        journal.complete(0, success: true)
        try await settle(harness.session)
        #expect(harness.collector.take().joined().map(\.sequence) == [1, 2])
        #expect(try await harness.session.durable(first).version == 1)
        #expect(try await harness.session.durable(second).version == 2)
    }

    /// Found by scripts/crash-test.sh: a request that changed nothing was answered at once with
    /// the session's version, though the batch that made that version was still being written;
    /// a kill then left the session below a version a client had been given.
    @Test func aNoOpIsAnsweredOnlyOnceTheVersionItReportsIsDurable() async throws {
        let (harness, journal) = try await heldCounter()
        _ = try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        let unchanged = try await harness.session.replaceState(await harness.session.describe().state)
        #expect(unchanged.events.isEmpty && unchanged.version == 1)
        let session = harness.session
        let answered = Atomic<Bool>(false)
        let waiting = Task {
            let outcome = try await session.durable(unchanged)
            answered.store(true, ordering: .relaxed)
            return outcome.version
        }
        try await Task.sleep(for: .milliseconds(50))
        let early = answered.load(ordering: .relaxed)
        #expect(!early, "version 1 is not durable yet")
        journal.release(success: true)
        #expect(try await waiting.value == 1)
    }

    /// The journal refuses the later writes of a generation once one fails; the engine rolls back
    /// only once the failure is the oldest write it waits for, so what is durable stays applied.
    @Test func aFailedWriteRollsBackEvenIfALaterOneAnsweredFirst() async throws {
        let harness = try await Harness("counter")
        let journal = MemoryJournal()
        _ = await harness.session.makeDurable(journal: journal)
        _ = try await harness.session.durable(try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil))
        journal.set(.hold)
        let second = try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        let third = try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        journal.complete(1, success: false)
        try await Task.sleep(for: .milliseconds(50))
        #expect(await harness.session.describe().state["count"] == 3, "nothing rolls back while an earlier write is pending")
        journal.complete(0, success: false)
        try await settle(harness.session)
        await #expect(throws: NavigationError.storageUnavailable) { try await harness.session.durable(second) }
        await #expect(throws: NavigationError.storageUnavailable) { try await harness.session.durable(third) }
        #expect(await harness.session.describe().state["count"] == 1, "back to what is durable")
        #expect(harness.collector.take().joined().map(\.sequence) == [1])
    }

    /// A rollback cancels the effects running; what they left under way in the durable state
    /// settles as after a restart once the store takes writes again, not at the next restart.
    @Test func effectsARollbackCancelledSettleOnceTheStoreTakesWritesAgain() async throws {
        let harness = try await Harness("counter", dependencies: Harness.dependencies(facts: StalledFacts()))
        let journal = MemoryJournal()
        _ = await harness.session.makeDurable(journal: journal)
        _ = try await harness.session.durable(try await harness.session.perform(target: "root", action: "factButtonTapped", arguments: nil))
        let rollbacks = Mutex(0)
        await harness.session.onRollback { rollbacks.withLock { $0 += 1 } }
        journal.set(.refuse)
        let refused = try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        await #expect(throws: NavigationError.storageUnavailable) { try await harness.session.durable(refused) }
        #expect(await harness.session.describe().state["factIsLoading"] == true, "rolled back to the durable spinner")
        // While the disk stays full, the settling waits: no write that would fail, and roll the
        // session back (closing its streams) again, every second.
        try await Task.sleep(for: NavigationSession.settlingDelay * 2.5)
        #expect(await harness.session.describe().state["factIsLoading"] == true)
        #expect(rollbacks.withLock { $0 } == 1, "only the refused request's rollback")
        journal.set(.accept)
        var settled = false
        for _ in 0..<250 where !settled {
            try await Task.sleep(for: .milliseconds(20))
            settled = await harness.session.describe().state["factIsLoading"] == false
        }
        #expect(settled)
        #expect(journal.entries.last?.events.map(\.kind) == [.state], "settled in an ordinary, durable batch")
    }

    /// A deletion decided on a version: nothing changes the session while it is on its way,
    /// and a deletion that failed leaves the session working.
    @Test func aDeletionUnderWayRefusesChangesUntilItFails() async throws {
        let harness = try await Harness("counter")
        let version = await harness.session.describe().version
        await #expect(throws: NavigationError.versionMismatch(expected: version + 5, current: version)) {
            try await harness.session.close(ifMatch: version + 5)
        }
        let moved = try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        #expect(moved.version == version + 1, "a refused deletion changes nothing")
        try await harness.session.close(ifMatch: version + 1)
        await #expect(throws: NavigationError.sessionEnding, "503: the deletion may yet fail") {
            try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        }
        await #expect(throws: NavigationError.sessionEnding, "one deletion at a time") { try await harness.session.close(ifMatch: nil) }
        await harness.session.reopen()
        let after = try await harness.session.perform(target: "root", action: "incrementButtonTapped", arguments: nil)
        #expect(after.version == version + 2)
    }

    @Test func aFailedWriteRollsTheSessionBackAndRefusesItsRequests() async throws {
        var harness = try await Harness("app", state: json(#"{"path":[{"counter":{}}]}"#))
        let journal = MemoryJournal()
        _ = await harness.session.makeDurable(journal: journal)
        _ = try await harness.session.durable(try await harness.session.perform(target: "root", action: "settingsButtonTapped", arguments: nil))
        try await harness.sync()
        let before = await harness.session.describe()
        let rolledBack = Mutex(false)
        await harness.session.onRollback { rolledBack.withLock { $0 = true } }

        journal.set(.refuse)
        let pushed = try await harness.session.perform(target: "root", action: "counterButtonTapped", arguments: nil)
        await #expect(throws: NavigationError.storageUnavailable) { try await harness.session.durable(pushed) }
        try await settle(harness.session)
        let after = await harness.session.describe()
        #expect(after.version == before.version && after.state == before.state && after.navigation == before.navigation)
        #expect(rolledBack.withLock { $0 })
        #expect(harness.collector.take().isEmpty, "nothing of the failed write was published")

        // Once the store takes writes again, the session goes on where the durable state was.
        journal.set(.accept)
        let retried = try await harness.session.durable(try await harness.session.perform(target: "root", action: "counterButtonTapped", arguments: nil))
        #expect(retried.version == before.version + 1)
        #expect(journal.entries.last?.snapshot != nil, "the first write after a rollback carries a snapshot, whatever the refused one carried")
        try await Task.sleep(for: .milliseconds(20))
        try await harness.sync()
    }
}

@Suite struct JSONPatchTests {
    private func randomJSON(_ random: inout SplitMix64, depth: Int = 0) -> JSON {
        switch random.next(below: depth > 3 ? 4 : 7) {
        case 0: return .null
        case 1: return .bool(random.next(below: 2) == 0)
        case 2: return .int(random.next(below: 5))
        case 3: return .string(["a", "b/c", "d~e", ""][random.next(below: 4)])
        case 4, 5: return .array((0..<random.next(below: 4)).map { _ in randomJSON(&random, depth: depth + 1) })
        default:
            var object = JSONObject()
            for key in ["x", "y/z", "~w", "v"] where random.next(below: 2) == 0 { object[key] = randomJSON(&random, depth: depth + 1) }
            return .object(object)
        }
    }

    @Test func applyingTheDiffGivesTheNewDocument() throws {
        var random = SplitMix64(seed: 7)
        for _ in 0..<3000 {
            let old = randomJSON(&random)
            var new = random.next(below: 3) == 0 ? randomJSON(&random) : old
            if case .object(var object) = new, random.next(below: 2) == 0 {
                object["x"] = randomJSON(&random)
                new = .object(object)
            }
            let patch = JSONPatch.diff(from: old, to: new)
            #expect(try JSONPatch.apply(patch, to: old) == new)
            if old == new { #expect(patch == .array([])) }
        }
    }

    /// RFC 6901: `~1` is `/` and `~0` is `~`, read in one pass, so `~01` names the key `~1`.
    @Test func pointerEscapesFollowRFC6901() throws {
        let document = json(#"{"a/b":0,"m~n":0,"~1":0,"~":0}"#)
        let patch = json(#"[{"op":"replace","path":"/a~1b","value":1},{"op":"replace","path":"/m~0n","value":2},{"op":"replace","path":"/~01","value":3},{"op":"replace","path":"/~0","value":4}]"#)
        #expect(try JSONPatch.apply(patch, to: document) == json(#"{"a/b":1,"m~n":2,"~1":3,"~":4}"#))
        #expect(JSONPatch.diff(from: document, to: json(#"{"a/b":0,"m~n":0,"~1":5,"~":0}"#))
                == json(#"[{"op":"replace","path":"/~01","value":5}]"#))
    }

    @Test func aPushOntoALongPathWritesOnlyTheNewElement() {
        let path = JSON.array((0..<1000).map { .object(JSONObject([("counter", .object(JSONObject([("count", .int($0))])))])) })
        var longer = path.arrayValue ?? []
        longer.append(["settings": ["isOn": false]])
        let patch = JSONPatch.diff(from: ["path": path], to: ["path": .array(longer)])
        #expect(patch == json(#"[{"op":"add","path":"/path/-","value":{"settings":{"isOn":false}}}]"#))
    }

    @Test func aPatchThatDoesNotFitIsRefused() {
        #expect(throws: JSONPatch.Failure.self) { try JSONPatch.apply(json(#"[{"op":"remove","path":"/nope"}]"#), to: ["a": 1]) }
        #expect(throws: JSONPatch.Failure.self) { try JSONPatch.apply(json(#"[{"op":"replace","path":"/a/3","value":1}]"#), to: ["a": [1]]) }
        #expect(throws: JSONPatch.Failure.self) { try JSONPatch.apply(json(#"{"op":"add"}"#), to: ["a": 1]) }
    }
}
