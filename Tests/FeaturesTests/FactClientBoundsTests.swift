import Features
import Foundation
import Synchronization
@testable import NavigationCore
import Testing
import TestSupport

/// A fact service's answer is hostile input: a deadline for the whole fetch, a cap on the body,
/// no redirects, and a fetch that stops when its session ends. Every failure is an alert the
/// user can act on, and the spinner always stops.
@Suite struct FactClientBoundsTests {
    @Test func aServiceDrippingBytesFailsAtTheDeadline() async throws {
        // A byte every 50 ms would keep an idle timeout of 1 s from ever firing: the 1,000-byte
        // body would take 50 s. Counted in bytes the service got out, not in time, which a
        // loaded machine stretches.
        let stub = try FactStub(.drip(interval: .milliseconds(50)))
        defer { stub.stop() }
        let message = try await failureAlert(LiveFactClient(baseURL: stub.baseURL, timeout: .seconds(1)))
        #expect(message == "The fact service did not answer in full within 1 seconds.")
        #expect(await eventually(within: .seconds(20)) { stub.openConnections == 0 }, "the transfer was closed")
        #expect((1..<200).contains(stub.bodyBytesSent), "\(stub.bodyBytesSent) of 1000 bytes were taken")
    }

    @Test(arguments: [true, false])
    func aBodyOverTheLimitIsRefusedAndNotRead(announced: Bool) async throws {
        let stub = try FactStub(.huge(bytes: 200_000_000, announced: announced))
        defer { stub.stop() }
        let message = try await failureAlert(LiveFactClient(baseURL: stub.baseURL))
        #expect(message == "The fact service sent more than 64 KiB; a fact must be shorter.")
        // What socket buffers took in before the client closed: far from the 200 MB offered.
        #expect(await eventually(within: .seconds(20)) { stub.openConnections == 0 })
        #expect(stub.bodyBytesSent < 32_000_000, "\(stub.bodyBytesSent) bytes were read")
    }

    @Test func aBodyOfExactlyTheLimitIsTheFact() async throws {
        let stub = try FactStub(.huge(bytes: LiveFactClient.maxBodyBytes, announced: false))
        defer { stub.stop() }
        let fact = try await LiveFactClient(baseURL: stub.baseURL).fact(about: 1)
        #expect(fact.utf8.count == 64 * 1024)
        let over = try FactStub(.huge(bytes: LiveFactClient.maxBodyBytes + 1, announced: false))
        defer { over.stop() }
        await #expect(throws: FactError.tooLarge(limit: 64 * 1024)) { try await LiveFactClient(baseURL: over.baseURL).fact(about: 1) }
    }

    /// A fact becomes a string in state: a server with shorter strings takes shorter facts.
    @Test func aSmallerLimitIsKept() async throws {
        let stub = try FactStub(.huge(bytes: 1001, announced: false))
        defer { stub.stop() }
        await #expect(throws: FactError.tooLarge(limit: 1000)) { try await LiveFactClient(baseURL: stub.baseURL, maxBodyBytes: 1000).fact(about: 1) }
        #expect(try await LiveFactClient(baseURL: stub.baseURL, maxBodyBytes: 1001).fact(about: 1).utf8.count == 1001)
        #expect(FactError.tooLarge(limit: 1000).message == "The fact service sent more than 1000 bytes; a fact must be shorter.")
    }

    @Test func aRedirectToAnotherHostIsNotFollowed() async throws {
        // 127.0.0.1 and localhost are two hosts to a URL, whatever they resolve to.
        let elsewhere = try FactStub(.facts)
        defer { elsewhere.stop() }
        let stub = try FactStub(.redirect(location: "http://localhost:\(elsewhere.port)/7"))
        defer { stub.stop() }
        let message = try await failureAlert(LiveFactClient(baseURL: stub.baseURL))
        #expect(message == "The fact service redirected to another host (localhost); navd never follows a redirect to another host.")
        #expect(elsewhere.requestedPaths.isEmpty)
    }

    @Test func aRedirectWithinTheHostIsNotFollowedEither() async throws {
        let stub = try FactStub(.redirect(location: "/moved/0"))
        defer { stub.stop() }
        let message = try await failureAlert(LiveFactClient(baseURL: stub.baseURL))
        #expect(message == "The fact service redirected to http://127.0.0.1:\(stub.port)/moved/0; navd follows no redirects, so its fact service address must be updated.")
        #expect(stub.requestedPaths == ["/0"])
    }

    @Test func endingTheSessionStopsTheFetch() async throws {
        let stub = try FactStub(.drip(interval: .milliseconds(50)))
        defer { stub.stop() }
        let counter = try await Harness("counter", dependencies: Harness.dependencies(facts: LiveFactClient(baseURL: stub.baseURL, timeout: .seconds(60))))
        let started = try await counter.session.perform(target: "root", action: "factButtonTapped", arguments: nil)
        // Generous: the whole suite runs in parallel on two cores.
        #expect(await eventually(within: .seconds(20)) { stub.bodyBytesSent > 0 })
        await counter.session.end(.deleted)
        _ = await counter.session.waitForEffects(of: started, timeout: .seconds(10))
        // The transfer is gone: the service's next byte finds the connection closed, long
        // before the 60 s deadline or the 50 s the body would take.
        #expect(await eventually(within: .seconds(20)) { stub.openConnections == 0 })
    }

    @Test func aTapWhileAFetchRunsStartsNoOther() async throws {
        let stub = try FactStub(.drip(interval: .milliseconds(50)))
        defer { stub.stop() }
        var counter = try await Harness("counter", dependencies: Harness.dependencies(facts: LiveFactClient(baseURL: stub.baseURL, timeout: .milliseconds(500))))
        let first = try await counter.session.perform(target: "root", action: "factButtonTapped", arguments: nil)
        let second = try await counter.session.perform(target: "root", action: "factButtonTapped", arguments: nil)
        #expect(second.events.isEmpty)
        _ = await counter.session.waitForEffects(of: second, timeout: .seconds(10))
        _ = await counter.session.waitForEffects(of: first, timeout: .seconds(10))
        #expect(stub.requestedPaths == ["/0"])
        #expect(await counter.state()["factIsLoading"] == false)
        try await counter.sync()
    }

    /// The per-session cap tells sessions apart by the owner each session binds around its
    /// effects; the effect itself stays on the session's executor, inside the transaction.
    @Test func anEffectKnowsItsSessionAndRunsInItsTransaction() async throws {
        let recorder = OwnerRecorder()
        var sessions: [Harness] = []
        for _ in 0..<2 {
            var counter = try await Harness("counter", dependencies: Harness.dependencies(facts: recorder))
            let started = try await counter.session.perform(target: "root", action: "factButtonTapped", arguments: nil)
            // The synchronous part (the spinner) is this transaction's, not a later batch's.
            #expect(started.events.map(\.data) == [json(#"{"feature":"root","changes":{"factIsLoading":true}}"#)])
            _ = await counter.session.waitForEffects(of: started, timeout: .seconds(10))
            try await counter.sync()
            sessions.append(counter)
        }
        let owners = recorder.owners
        #expect(owners.count == 2 && !owners.contains(nil))
        #expect(Set(owners.compactMap { $0 }).count == 2)
    }

    /// Taps the fact button and returns what the alert says, checking that the spinner stopped
    /// and no fact was shown.
    private func failureAlert(_ client: LiveFactClient, sourceLocation: SourceLocation = #_sourceLocation) async throws -> String {
        var counter = try await Harness("counter", dependencies: Harness.dependencies(facts: client))
        let started = try await counter.session.perform(target: "root", action: "factButtonTapped", arguments: nil)
        _ = await counter.session.waitForEffects(of: started, timeout: .seconds(30))
        let alert = try #require(await counter.tree()["presentations"]?[0], sourceLocation: sourceLocation)
        #expect(alert["slot"] == "destination.alert", sourceLocation: sourceLocation)
        #expect(await counter.state()["factIsLoading"] == false, sourceLocation: sourceLocation)
        try await counter.sync(sourceLocation: sourceLocation)
        return alert["alert"]?["message"]?.stringValue ?? ""
    }
}

/// Answers at once and remembers which session asked.
private final class OwnerRecorder: FactClient {
    private let seen = Mutex<[EffectOwner?]>([])

    var owners: [EffectOwner?] { seen.withLock { $0 } }

    func fact(about number: Int) async throws(FactError) -> String {
        seen.withLock { $0.append(EffectOwner.current) }
        // Answers later, as a service does, so the tap's own transaction ends first.
        await Task.yield()
        return "\(number) is recorded."
    }
}
