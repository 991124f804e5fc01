import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import NavigationClient
import Observation
import Synchronization
import Testing

/// The Swift client against a real navd over loopback: the mirror always settles on exactly
/// the tree `GET …/navigation` returns (API.md, invariant 8).
@MainActor @Suite(.serialized) struct NavigationMirrorTests {
    /// Waits until the mirror holds what navd holds, and returns that tree.
    @discardableResult
    func settled(_ mirror: NavigationMirror) async throws -> NavigationNode {
        let expected = try await mirror.session.navigation()
        try await until("the mirror to equal GET /navigation") { mirror.tree == expected }
        return expected
    }

    @Test func aCounterSessionIsMirroredWithTypedNodes() async throws {
        let navd = try await LoopbackNavd()
        let created = try await navd.client.createSession(feature: "counter")
        #expect(created.navigation.feature == "counter" && created.navigation.id == "root")
        let session = navd.client.session(id: created.id, token: created.token)
        let mirror = NavigationMirror(session: session)
        #expect(mirror.connection == .connecting)
        mirror.start()
        try await until("open") { mirror.connection == .open && mirror.tree != nil }
        #expect(mirror.tree == created.navigation)

        // What a SwiftUI view or a UIKit controller does: observe the tree, hear that it changed.
        let changed = Atomic(false)
        withObservationTracking { _ = mirror.tree } onChange: { changed.store(true, ordering: .sequentiallyConsistent) }
        let incremented = try await session.perform("incrementButtonTapped")
        try await until("an observed change") { changed.load(ordering: .sequentiallyConsistent) }
        #expect(incremented.version == created.version + 1)
        _ = try await session.perform("incrementButtonTapped")
        let tree = try await settled(mirror)
        #expect(tree.state["count"] == .number(2))
        let described = try await session.describe()
        #expect(described.id == created.id && described.feature == "counter" && described.version == created.version + 2)
        #expect(described.state["count"] == .number(2) && described.navigation == tree)

        _ = try await session.perform("factButtonTapped", wait: true)
        let withSheet = try await settled(mirror)
        let sheet = try #require(withSheet.presentations.first)
        #expect(sheet.style == .sheet && sheet.slot == "destination.fact" && sheet.feature == "fact")
        #expect(sheet.state["value"]?.stringValue?.isEmpty == false)

        let dismissed = try await session.dismiss(sheet.id)
        #expect(dismissed.events.map(\.event) == [.dismiss(id: sheet.id, origin: .client)])
        #expect(try await settled(mirror).presentations.isEmpty)
        mirror.stop()
        #expect(mirror.connection == .ended && mirror.endReason == "stopped")
        await navd.stop()
    }

    /// navd's integers are 64-bit: one past ±2⁵³, which a `Double` would round, is mirrored and
    /// sent back exact, and every other number stays a `number`.
    @Test func aWholeNumberPastWhatADoubleHoldsStaysExact() async throws {
        let navd = try await LoopbackNavd()
        let large: Int64 = 9_007_199_254_740_993
        let created = try await navd.client.createSession(feature: "counter", state: .object(["count": .integer(large)]))
        #expect(created.navigation.state["count"] == .integer(large) && created.navigation.state["count"]?.intValue == Int(large))
        let session = navd.client.session(id: created.id, token: created.token)
        let mirror = NavigationMirror(session: session)
        mirror.start()
        try await until("open") { mirror.connection == .open && mirror.tree != nil }
        #expect(mirror.tree?.state["count"] == .integer(large))
        _ = try await session.replaceState(.object(["count": .integer(.max)]))
        #expect(try await settled(mirror).state["count"] == .integer(.max))
        _ = try await session.replaceState(.object(["count": .number(3)]))
        #expect(try await settled(mirror).state["count"] == .number(3))
        mirror.stop()
        await navd.stop()
    }

    @Test func anAppStackIsMirroredThroughPushPopAndDeepLinks() async throws {
        let navd = try await LoopbackNavd()
        let created = try await navd.client.createSession(feature: "app")
        let session = navd.client.session(id: created.id, token: created.token)
        let mirror = NavigationMirror(session: session)
        mirror.start()
        try await until("the snapshot") { mirror.tree != nil }

        _ = try await session.perform("counterButtonTapped")
        _ = try await session.push(.object(["settings": .object([:])]))
        _ = try await session.push(.object(["counter": .object(["count": .number(7)])]))
        let pushed = try await settled(mirror)
        let stack = try #require(pushed.stacks.first)
        #expect(stack.slot == "path" && stack.elements.map(\.feature) == ["counter", "settings", "counter"])
        #expect(stack.elements[2].state["count"] == .number(7))

        // A two-way binding: the settings screen's toggle.
        let bound = try await session.bind(stack.elements[1].id, "isOn", to: .bool(true))
        #expect(bound.events.map(\.event) == [.state(feature: stack.elements[1].id, changes: ["isOn": .bool(true)])])
        #expect(try await settled(mirror).stacks.first?.elements[1].state["isOn"] == .bool(true))

        _ = try await session.pop(stack.id, .to(stack.elements[0].id))
        #expect(try await settled(mirror).stacks.first?.elements.count == 1)

        // A deep link: three screens deep with a fact sheet on top.
        let deepLink: JSONValue = .object(["path": .array([
            .object(["counter": .object([:])]), .object(["settings": .object([:])]),
            .object(["counter": .object(["destination": .object(["fact": .object(["value": .string("0 is a good number")])])])]),
        ])])
        _ = try await session.replaceState(deepLink)
        let linked = try await settled(mirror)
        #expect(linked.stacks.first?.elements.last?.presentations.first?.style == .sheet)
        await navd.stop()
    }

    /// Every mutating call can wait for the work it starts, and says when its answer lacks some
    /// of that work's events (here a server that keeps no events to answer from).
    @Test func aWaitingCallSaysWhenItsEffectsEventsAreElsewhere() async throws {
        for eventBuffer in [1024, 0] {
            let navd = try await LoopbackNavd(eventBuffer: eventBuffer)
            let created = try await navd.client.createSession(feature: "counter")
            let session = navd.client.session(id: created.id, token: created.token)
            let fetched = try await session.perform("factButtonTapped", wait: true)
            let presented = fetched.events.contains { if case .present = $0.event { true } else { false } }
            #expect(fetched.effectsPending == (eventBuffer == 0))
            #expect(presented == (eventBuffer != 0), "the fact's sheet is in the answer only when navd still holds its events")
            let sheet = try #require(try await session.navigation().presentations.first?.id)
            let dismissed = try await session.dismiss(sheet, wait: true)
            #expect(!dismissed.effectsPending && dismissed.version == fetched.version + 1)
            await navd.stop()
        }
    }

    @Test func errorsAreTyped() async throws {
        let navd = try await LoopbackNavd()
        let created = try await navd.client.createSession(feature: "app")
        let session = navd.client.session(id: created.id, token: created.token)

        await #expect { try await session.pop("s1", .count(5)) } throws: { ($0 as? NavdError)?.code == .invalidPop && ($0 as? NavdError)?.status == 422 }
        await #expect { try await session.perform("counterButtonTapped", ifMatch: created.version + 9) } throws: {
            ($0 as? NavdError)?.code == .versionMismatch && ($0 as? NavdError)?.status == 412
        }
        await #expect { try await session.dismiss("p999") } throws: { ($0 as? NavdError)?.status == 409 }
        await #expect { try await session.perform("noSuchAction") } throws: { ($0 as? NavdError)?.code == .unknownAction }
        await #expect { try await navd.client.createSession(feature: "counter", state: .object(["count": .string("x")])) } throws: {
            ($0 as? NavdError)?.code == .invalidState
        }
        let stranger = navd.client.session(id: created.id, token: String(repeating: "0", count: 64))
        await #expect { try await stranger.navigation() } throws: { ($0 as? NavdError)?.code == .unauthorized }
        // Nothing above changed the session.
        #expect(try await session.perform("counterButtonTapped", ifMatch: created.version).version == created.version + 1)
        await navd.stop()
    }

    /// A snapshot over a megabyte (a state any client can build) is followed whole; one over
    /// the mirror's own limit ends it with a reason, rather than reconnecting for ever.
    @Test func aLargeSnapshotIsTakenWholeAndOneOverTheLimitEndsTheMirror() async throws {
        let navd = try await LoopbackNavd()
        let created = try await navd.client.createSession(feature: "app")
        let session = navd.client.session(id: created.id, token: created.token)
        let text = String(repeating: "x", count: 60_000)
        for _ in 0..<20 {
            _ = try await session.push(.object(["counter": .object(["destination": .object(["fact": .object(["value": .string(text)])])])]))
        }
        let mirror = NavigationMirror(session: session)
        mirror.start()
        let expected = try await settled(mirror)
        #expect(expected.stacks.first?.elements.count == 20)
        mirror.stop()

        let small = NavigationMirror(session: session, maxEventBytes: 64 << 10)
        small.start()
        try await until("the mirror to end") { small.connection == .ended }
        #expect(small.endReason == "eventTooLarge")
        #expect(small.tree == nil)
        await navd.stop()
    }

    @Test func deletingTheSessionEndsTheMirror() async throws {
        let navd = try await LoopbackNavd()
        let created = try await navd.client.createSession(feature: "counter")
        let session = navd.client.session(id: created.id, token: created.token)
        let mirror = NavigationMirror(session: session)
        mirror.start()
        try await until("open") { mirror.connection == .open }
        try await session.end()
        try await until("ended") { mirror.connection == .ended }
        #expect(mirror.endReason == "deleted")

        // A mirror of a session that is gone, or with a token that is not its, ends at once.
        let late = NavigationMirror(session: session)
        late.start()
        try await until("gone") { late.connection == .ended }
        #expect(late.endReason == "gone")
        let other = try await navd.client.createSession(feature: "counter")
        let stranger = NavigationMirror(session: navd.client.session(id: other.id, token: created.token))
        stranger.start()
        try await until("unauthorized") { stranger.connection == .ended }
        #expect(stranger.endReason == "unauthorized" && stranger.tree == nil)
        await navd.stop()
    }

    /// navd restarts (its streams close without `end`) while the session moves on: the mirror
    /// reconnects with a fresh ticket and `lastEventId`, and gets every event once, in order.
    @Test func aReconnectionMissesNothingAndRepeatsNothing() async throws {
        let directory = try LoopbackNavd.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        var navd = try await LoopbackNavd(durableIn: directory)
        let created = try await navd.client.createSession(feature: "app")
        let session = navd.client.session(id: created.id, token: created.token)
        let mirror = NavigationMirror(session: session, retry: .init(initial: .milliseconds(800), maximum: .seconds(2)))
        var applied: [(id: Int?, event: NavigationEvent)] = []
        mirror.onEvent = { applied.append(($0, $1)) }
        mirror.start()
        try await until("open") { mirror.connection == .open }
        _ = try await session.perform("counterButtonTapped")
        _ = try await session.perform("incrementButtonTapped", target: try #require(try await session.navigation().stacks.first?.elements.first?.id))
        try await settled(mirror)

        navd = try await navd.restart()
        try await until("the stream to break") { mirror.connection == .reconnecting }
        let appliedBefore = applied.count
        // While the mirror waits out its back-off, the session moves on.
        _ = try await session.perform("settingsButtonTapped")
        _ = try await session.perform("counterButtonTapped")
        let stackID = try #require(try await session.navigation().stacks.first?.id)
        _ = try await session.pop(stackID)
        try await until("reconnected") { mirror.connection == .open && mirror.lastEventID != nil }
        let final = try await settled(mirror)
        #expect(applied.count > appliedBefore, "the events of the gap came on the resumed stream")
        #expect(final.stacks.first?.elements.map(\.feature) == ["counter", "settings"])

        let snapshots = applied.filter { if case .snapshot = $0.event { true } else { false } }
        #expect(snapshots.count == 1, "a resumed stream sends no second snapshot")
        let ids = applied.compactMap(\.id)
        #expect(ids.count == applied.count)
        #expect(Set(ids).count == ids.count, "nothing twice")
        #expect(zip(ids, ids.dropFirst()).allSatisfy { $1 == $0 + 1 }, "nothing missed: \(ids)")
        mirror.stop()
        await navd.stop()
    }

    /// A mutation's own events are applied from its answer when they follow on from the tree's
    /// last event, before the stream brings them (here it never does); one that does not follow
    /// on is left to the stream.
    @Test func aMutationsOwnEventsAreAppliedFromItsAnswerWhenTheyFollowOn() async throws {
        let navd = try ScriptedNavd(hold: 10, answer: { path in
            guard path.hasSuffix("/actions") else { return nil }
            // The first answer follows on from the snapshot (id 1); the second skips id 3.
            return Self.answers.withLock { answers in answers.isEmpty ? nil : answers.removeFirst() }
        }) { _ in "id: 1\nevent: snapshot\ndata: \(HostileServerTests.snapshot)\n\n" }
        defer { navd.stop() }
        let mirror = NavigationMirror(session: navd.client.session(id: "s", token: "t"), retry: HostileServerTests.fastRetry)
        var applied: [Int?] = []
        mirror.onEvent = { id, _ in applied.append(id) }
        mirror.start()
        defer { mirror.stop() }
        try await until("the snapshot") { mirror.lastEventID == 1 }

        mirror.apply(try await mirror.session.perform("pushTapped"))
        #expect(mirror.tree?.stacks.first?.elements.map(\.id) == ["e1"], "its push is on screen after await")
        #expect(mirror.lastEventID == 2)
        mirror.apply(try await mirror.session.perform("presentTapped"))
        #expect(mirror.tree?.presentations.isEmpty == true, "event 4 does not follow on from 2: left to the stream")
        #expect(mirror.lastEventID == 2)
        #expect(applied == [1, 2])
    }

    nonisolated static let answers = Mutex([
        #"{"version":2,"events":[{"id":2,"event":"push","data":\#(HostileServerTests.push)}]}"#,
        #"{"version":4,"events":[{"id":4,"event":"present","data":\#(HostileServerTests.present)}]}"#,
    ])

    /// `waitTimeout` bounds a request with `wait` with navd's `?timeout=`; a request without
    /// `wait` carries neither.
    @Test func waitTimeoutBoundsAWaitWithTheTimeoutQuery() async throws {
        let asked = Mutex<[String]>([])
        let navd = try ScriptedNavd(answer: { path in
            guard path.contains("/actions") else { return nil }
            asked.withLock { $0.append(path) }
            return #"{"version":0,"events":[]}"#
        }) { _ in "" }
        defer { navd.stop() }
        var session = navd.client.session(id: "s", token: "t")
        session.waitTimeout = .milliseconds(2500)
        _ = try await session.perform("factButtonTapped", wait: true)
        _ = try await session.perform("incrementButtonTapped")
        #expect(asked.withLock { $0 } == ["/sessions/s/actions?wait=true&timeout=2.5", "/sessions/s/actions"])
    }

    /// A change that was made is not reported as failed for an event this client cannot read
    /// (a newer navd's style): the events before it come with the answer, the rest on the stream.
    @Test func anAnswerWithAnEventTheClientCannotReadStillSucceeds() async throws {
        let present = #"{"id":"p1","parent":"root","slot":"destination.fact","feature":"fact","style":"%@","state":{},"stacks":[]}"#
        let answer = #"{"version":3,"events":["#
            + #"{"id":7,"event":"state","data":{"feature":"root","changes":{"count":1}}},"#
            + #"{"id":8,"event":"present","data":"# + present.replacingOccurrences(of: "%@", with: "hologram") + "},"
            + #"{"id":9,"event":"state","data":{"feature":"root","changes":{"count":2}}}]}"#
        let navd = try ScriptedNavd(answer: { path in path.contains("/actions") ? answer : nil }) { _ in "" }
        defer { navd.stop() }
        let result = try await navd.client.session(id: "s", token: "t").perform("incrementButtonTapped")
        #expect(result.version == 3)
        #expect(result.events.map(\.id) == [7])
    }

    /// navd holds a `wait`'s answer back on purpose: the configuration's bound on silence does
    /// not cut it off as a dead connection (the action took effect, and a retry would do it twice).
    @Test func aWaitOutlastsTheConfiguredSilenceByItsOwnBound() async throws {
        let navd = try ScriptedNavd(answer: { path in
            guard path.contains("/actions") else { return nil }
            if path.contains("wait=true") { usleep(1_500_000) }  // the effect takes a while
            return #"{"version":1,"events":[]}"#
        }) { _ in "" }
        defer { navd.stop() }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 1
        var session = NavdClient(baseURL: navd.client.baseURL, configuration: configuration).session(id: "s", token: "t")
        session.waitTimeout = .seconds(2)
        #expect(try await session.perform("factButtonTapped", wait: true).version == 1)
    }
}
