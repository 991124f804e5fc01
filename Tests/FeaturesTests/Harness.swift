import Features
import Foundation
@testable import NavigationCore
import Synchronization
import Testing

/// A fact service that answers at once, for tests about navigation rather than fetching.
struct InstantFacts: FactClient {
    func fact(about number: Int) async throws(FactError) -> String { "\(number) is a test number." }
}

/// A fact service that takes 300 ms: long enough for a test to act while a fetch runs.
struct SlowFacts: FactClient {
    func fact(about number: Int) async throws(FactError) -> String {
        try? await Task.sleep(for: .milliseconds(300))
        return "\(number) is slow."
    }
}

/// A fact service that answers after a while, so a fetch is still running when a test acts.
/// Answers once the test releases it, however slowly a busy machine runs the test.
final class HeldFacts: FactClient {
    private let released = Mutex(false)

    func release() { released.withLock { $0 = true } }

    func fact(about number: Int) async throws(FactError) -> String {
        while !released.withLock({ $0 }) { try? await Task.sleep(for: .milliseconds(10)) }
        return "\(number) took a while."
    }
}

/// Every batch a session published, in order.
final class EventCollector: Sendable {
    private let batches = Mutex<[[NavigationEvent]]>([])

    func append(_ events: [NavigationEvent]) { batches.withLock { $0.append(events) } }

    func take() -> [[NavigationEvent]] {
        batches.withLock { batches in
            defer { batches.removeAll() }
            return batches
        }
    }
}

/// A session with a client replica that follows its published events.
struct Harness {
    let session: NavigationSession
    let catalog: FeatureCatalog
    let collector = EventCollector()
    var replica: NavigationReplica
    var lastSequence = 0

    static func dependencies(facts: any FactClient = InstantFacts(), delay: Duration = .zero) -> FeatureDependencies {
        FeatureDependencies(factClient: facts, connectDelay: delay, alertDismissDelay: delay)
    }

    init(_ feature: String, state: JSON? = nil, dependencies: FeatureDependencies = Harness.dependencies()) async throws {
        catalog = FeatureSet.catalog(dependencies)
        session = try catalog.makeSession(feature: feature, state: state)
        let collector = collector
        await session.onEvents { collector.append($0) }
        replica = try NavigationReplica(navigation: await session.navigation())
    }

    /// Applies what was published to the replica and checks it against the server's tree (rule 8).
    /// Returns the batches published since the last call.
    @discardableResult
    mutating func sync(sourceLocation: SourceLocation = #_sourceLocation) async throws -> [[NavigationEvent]] {
        let server = await session.navigation()
        let batches = collector.take()
        for event in batches.joined() {
            #expect(event.sequence == lastSequence + 1, "sequence numbers are contiguous", sourceLocation: sourceLocation)
            lastSequence = event.sequence
            try replica.apply(event: event.kind.rawValue, data: event.data)
        }
        #expect(replica.navigation == server, "replica equals the server's tree", sourceLocation: sourceLocation)
        return batches
    }

    func tree() async -> JSON { await session.navigation() }
    func state() async -> JSON { await session.describe().state }

    /// The id of the presentation in `slot` owned by `owner`.
    func presentation(_ slot: String, of owner: String = "root") async -> String? {
        func find(_ node: JSON) -> String? {
            if node["id"]?.stringValue == owner {
                return node["presentations"]?.arrayValue?.first { $0["slot"]?.stringValue == slot }?["id"]?.stringValue
            }
            for child in node["presentations"]?.arrayValue ?? [] { if let found = find(child) { return found } }
            for stack in node["stacks"]?.arrayValue ?? [] {
                for element in stack["elements"]?.arrayValue ?? [] { if let found = find(element) { return found } }
            }
            return nil
        }
        return find(await tree())
    }

    /// The id of the root's first stack and of its elements.
    func elements() async -> (stack: String, ids: [String]) {
        let root = await tree()
        guard let stack = root["stacks"]?.arrayValue?.first else { return ("", []) }
        return (stack["id"]?.stringValue ?? "", stack["elements"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? [])
    }
}

extension Array where Element == NavigationEvent {
    var kinds: [String] { map(\.kind.rawValue) }
}

func json(_ text: String) -> JSON {
    (try? JSONParser.parse(text)) ?? .null
}
