import Dispatch
import Features
@testable import NavigationCore
import Synchronization
import Testing

/// What all sessions may hold together (`SessionLimits.memory`): each is charged its state, its
/// kept events and a fixed share; once the budget is spent, sessions stop growing.
@Suite struct MemoryBudgetTests {
    private let catalog = FeatureSet.catalog(Harness.dependencies())

    private func gallery(_ budget: MemoryBudget, text: String = "") throws -> NavigationSession {
        try catalog.makeSession(feature: "gallery", state: json(#"{"text":"\#(text)"}"#), limits: SessionLimits(memory: budget))
    }

    private func editor(of session: NavigationSession) async throws -> String {
        try #require(await session.navigation()["presentations"]?[0]?["id"]?.stringValue)
    }

    @Test func aSessionIsChargedItsStateAndKeptEventsAndGivesThemBackWhenItGoes() async throws {
        let budget = MemoryBudget(limit: 1 << 30)
        var session: NavigationSession? = try gallery(budget)
        let made = budget.bytesInUse
        // The gallery and its editor: two features.
        #expect(await session!.featuresOnScreen == 2)
        #expect(await made == MemoryBudget.perSession + MemoryBudget.perFeature + session!.stateBytes)
        let text = String(repeating: "x", count: 10_000)
        let outcome = try await session!.bind(target: try await editor(of: session!), field: "text", value: .string(text))
        let events = outcome.events.reduce(0) { $0 + $1.encodedData.count }
        #expect(await budget.bytesInUse == MemoryBudget.perSession + MemoryBudget.perFeature + session!.stateBytes + events)
        #expect(budget.bytesInUse - made > 20_000, "the text, in the state and in the event that carried it")
        let other = try gallery(budget)
        #expect(await budget.bytesInUse == session!.charged + other.charged)
        session = nil
        #expect(await budget.bytesInUse == other.charged)
    }

    /// A session of many small screens is charged for each, not for their few bytes of state.
    @Test func eachFeatureOnScreenIsCharged() async throws {
        let budget = MemoryBudget(limit: 1 << 30)
        let path = Array(repeating: #"{"counter":{}}"#, count: 100).joined(separator: ",")
        let session = try catalog.makeSession(feature: "app", state: json(#"{"path":[\#(path)]}"#), limits: SessionLimits(memory: budget))
        #expect(await session.featuresOnScreen == 101)
        #expect(await budget.bytesInUse == MemoryBudget.perSession + 100 * MemoryBudget.perFeature + session.stateBytes)
    }

    @Test func onceSpentAChangeThatGrowsTheStateIsRefusedAndLeavesTheSessionAsItWas() async throws {
        let budget = MemoryBudget(limit: 1 << 20)
        let session = try gallery(budget, text: "abc")
        let editor = try await editor(of: session)
        // Spent, the headroom too.
        budget.charge(budget.limit * 2)
        #expect(budget.isSpent && budget.headroomIsSpent)
        let before = await session.describe()
        await #expect(throws: NavigationError.memorySpent(limit: budget.limit)) {
            try await session.bind(target: editor, field: "text", value: .string("abcd"))
        }
        let after = await session.describe()
        #expect(after.version == before.version && after.state == before.state)
        #expect(NavigationError.memorySpent(limit: 1).code == "over_capacity" && NavigationError.memorySpent(limit: 1).kind == .unavailable)
        // What does not grow the state goes on: another text of the same length, a shorter one.
        #expect(try await session.bind(target: editor, field: "text", value: .string("xyz")).events.count == 1)
        #expect(try await session.bind(target: editor, field: "text", value: .string("x")).events.count == 1)
    }

    @Test func onceSpentSmallStepsGoOnInTheHeadroomAndLargeOnesAreRefused() async throws {
        let budget = MemoryBudget(limit: 1 << 20)
        let session = try gallery(budget, text: "start")
        let editor = try await editor(of: session)
        budget.charge(budget.limit - budget.bytesInUse + 1000)
        #expect(budget.isSpent && !budget.headroomIsSpent)
        // A step of a few bytes is taken…
        #expect(try await session.bind(target: editor, field: "text", value: .string("started")).events.count == 1)
        // …one of more than `smallGrowth` is not…
        await #expect(throws: NavigationError.memorySpent(limit: budget.limit)) {
            try await session.bind(target: editor, field: "text", value: .string("started" + String(repeating: "y", count: MemoryBudget.smallGrowth + 1)))
        }
        // …and once the headroom is spent, no step is.
        budget.charge(budget.limit / 8)
        #expect(budget.headroomIsSpent)
        await #expect(throws: NavigationError.memorySpent(limit: budget.limit)) {
            try await session.bind(target: editor, field: "text", value: .string("started!"))
        }
        // Shrinking always is.
        #expect(try await session.bind(target: editor, field: "text", value: .string("s")).events.count == 1)
        // Given back, the budget lets it grow again.
        budget.charge(-budget.limit)
        #expect(try await session.bind(target: editor, field: "text", value: .string(String(repeating: "z", count: 1000))).events.count == 1)
    }

    @Test func onceSpentKeptEventsMakeRoomForNewOnesAndAResumeFromBeforeThemGetsASnapshot() async throws {
        let budget = MemoryBudget(limit: 1 << 20)
        let session = try gallery(budget, text: String(repeating: "a", count: 100))
        let editor = try await editor(of: session)
        for letter in ["b", "c", "d"] {
            _ = try await session.bind(target: editor, field: "text", value: .string(String(repeating: letter, count: 100)))
        }
        #expect(await session.attach(after: 1) { start, _ in start.isResume })
        budget.charge(budget.limit - budget.bytesInUse + 1000)
        let charged = budget.bytesInUse
        // Same-sized texts: the state holds its size, and the kept events theirs.
        for letter in ["e", "f", "g", "h", "i", "j"] {
            _ = try await session.bind(target: editor, field: "text", value: .string(String(repeating: letter, count: 100)))
        }
        #expect(budget.bytesInUse <= charged)
        #expect(await !session.attach(after: 1) { start, _ in start.isResume })
        let latest = await session.describe().version
        #expect(await session.attach(after: latest - 1) { start, _ in start.isResume }, "the newest batch is kept")
    }

    /// A restart brings back every session's state whatever the budget holds (it was
    /// acknowledged), but its kept events only as far as the budget has room: they serve resumes,
    /// and a store may keep more of them on disk than the budget lets the sessions hold.
    @Test func aRestoredSessionKeepsOnlyTheEventsTheBudgetHasRoomFor() async throws {
        let journal = MemoryJournal()
        let session = try gallery(MemoryBudget(limit: 1 << 30))
        let first = await session.makeDurable(journal: journal)
        let editor = try await editor(of: session)
        for letter in ["a", "b", "c", "d", "e", "f"] {
            _ = try await session.durable(try await session.bind(target: editor, field: "text", value: .string(String(repeating: letter, count: 10_000))))
        }
        let events = journal.entries.flatMap(\.events)
        func restored(_ budget: MemoryBudget) throws -> NavigationSession {
            try catalog.restoreSession(feature: "gallery", first, replaying: journal.entries, events: events,
                                       limits: SessionLimits(memory: budget), journal: MemoryJournal())
        }
        let roomy = try restored(MemoryBudget(limit: 1 << 30))
        #expect(await roomy.attach(after: 0) { start, _ in start.isResume }, "every event kept")

        // Room for the state and about two of the six texts' events.
        let tight = MemoryBudget(limit: await roomy.stateBytes + MemoryBudget.perSession + MemoryBudget.perFeature + 25_000)
        let restoredTight = try restored(tight)
        #expect(await restoredTight.describe().state == roomy.describe().state, "the state comes back whole")
        #expect(tight.bytesInUse <= tight.limit)
        #expect(await !restoredTight.attach(after: 0) { start, _ in start.isResume }, "a resume from before the kept events: a snapshot")
        let latest = try #require(events.last?.sequence)
        #expect(await restoredTight.attach(after: latest - 1) { start, _ in start.isResume }, "the newest events are kept")
    }

    /// Sessions restored at once (a restart rebuilds them on every core) share the room the
    /// budget has for their events: each takes its part in one step, so together they take what
    /// there was, not each all of it.
    @Test func roomTakenAtOnceIsSharedNotTakenTwice() {
        let budget = MemoryBudget(limit: 100_000)
        let granted = Atomic<Int>(0)
        DispatchQueue.concurrentPerform(iterations: 2_000) { _ in
            granted.add(budget.charge(0, andUpTo: 100), ordering: .relaxed)
        }
        #expect(granted.load(ordering: .relaxed) == 100_000 && budget.bytesInUse == 100_000)
        // What must come back is charged whatever the room: only the rest is bounded.
        #expect(budget.charge(500, andUpTo: 100) == 0 && budget.bytesInUse == 100_500)
    }

    @Test func onceSpentAnEffectsResultThatGrowsTheStateIsDroppedAndItsSpinnerSettles() async throws {
        let facts = SessionLimitTests.SizedFacts(delay: { _ in .milliseconds(10) }, size: { _ in 2000 })
        let catalog = FeatureSet.catalog(Harness.dependencies(facts: facts))
        let budget = MemoryBudget(limit: 1 << 20)
        let session = try catalog.makeSession(feature: "counter", state: json(#"{"count":0}"#), limits: SessionLimits(memory: budget))
        budget.charge(budget.limit - budget.bytesInUse + 1000)
        let started = try await session.perform(target: "root", action: "factButtonTapped", arguments: nil)
        #expect(await session.navigation()["state"]?["factIsLoading"] == .bool(true))
        _ = await session.waitForEffects(of: started, timeout: .seconds(5))
        var settled = false
        for _ in 0..<50 where !settled {
            try await Task.sleep(for: .milliseconds(100))
            settled = await session.navigation()["state"]?["factIsLoading"] == .bool(false)
        }
        #expect(settled, "a spinner is lowered however spent the budget")
        #expect(await session.navigation()["presentations"]?.arrayValue?.isEmpty == true, "the fact was dropped")
    }
}

extension NavigationSession.Start {
    fileprivate var isResume: Bool {
        if case .resume = self { return true }
        return false
    }
}
