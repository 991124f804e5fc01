import Foundation
import Features
import NavigationCore

/// Measures what one transaction costs, so it can be compared across the size of the state it
/// does not touch: incrementing a counter on top of a deep stack, and pushing onto a long path.
/// Run it in release: `swift run -c release navd-bench`. `--quick` runs every case a hundredth as
/// long, once: what the test suite does, so the benchmark keeps working as the engine changes.

struct NoFacts: FactClient {
    func fact(about number: Int) async throws(FactError) -> String { "\(number)" }
}

let catalog = FeatureSet.catalog(FeatureDependencies(factClient: NoFacts(), connectDelay: .zero, alertDismissDelay: .zero))

/// Far from every bound even for the longest path measured: navd's defaults would refuse a path
/// of 10,000 elements, and a session within half of a bound keeps a copy of its whole state before
/// each transaction (`SessionLimits`), which is what this measures the absence of.
let limits = SessionLimits(maxPathLength: 100_000, maxNodes: 100_000, maxStateBytes: 256 << 20)

func appSession(depth: Int, element: String) throws -> NavigationSession {
    let path = JSON.array(Array(repeating: JSON.object(JSONObject([(element, .object(JSONObject()))])), count: depth))
    return try catalog.makeSession(feature: "app", state: .object(JSONObject([("path", path)])), limits: limits)
}

func topElement(of session: NavigationSession) async -> String {
    let tree = await session.navigation()
    return tree["stacks"]?[0]?["elements"]?.arrayValue?.last?["id"]?.stringValue ?? "root"
}

let quick = CommandLine.arguments.dropFirst().contains("--quick")

/// Median of `rounds` runs of `iterations` operations, in microseconds per operation.
func measure(rounds: Int = quick ? 1 : 5, iterations: Int, _ operation: () async throws -> Duration) async rethrows -> Double {
    let iterations = quick ? max(1, iterations / 100) : iterations
    var perOperation: [Double] = []
    for _ in 0..<max(1, iterations / 10) { _ = try await operation() }  // warm up
    for _ in 0..<rounds {
        var total = Duration.zero
        for _ in 0..<iterations { total += try await operation() }
        perOperation.append(Double(total.components.attoseconds) / 1e12 / Double(iterations) + Double(total.components.seconds) * 1e6 / Double(iterations))
    }
    return perOperation.sorted()[rounds / 2]
}

let clock = ContinuousClock()
print(quick ? "transaction cost, one short round (--quick: not a measurement)" : "transaction cost, median of 5 rounds (µs per transaction)")
print("increment the counter on top of an app stack")
var baseline: Double?
for depth in [1, 10, 100, 1000] {
    let session = try appSession(depth: depth, element: "counter")
    let top = await topElement(of: session)
    let cost = try await measure(iterations: 20_000) {
        let start = clock.now
        _ = try await session.perform(target: top, action: "incrementButtonTapped", arguments: nil)
        return clock.now - start
    }
    baseline = baseline ?? cost
    print("  depth \(depth):".padding(toLength: 16, withPad: " ", startingAt: 0) + String(format: "%8.2f µs  (%.2f× depth 1)", cost, cost / (baseline ?? cost)))
}

print("push onto a path (each push is popped again, untimed)")
baseline = nil
let value = JSON.object(JSONObject([("settings", .object(JSONObject()))]))
for length in [1, 100, 10_000] {
    let session = try appSession(depth: length, element: "settings")
    let stack = (await session.navigation())["stacks"]?[0]?["id"]?.stringValue ?? ""
    let cost = try await measure(iterations: length >= 10_000 ? 2_000 : 10_000) {
        let start = clock.now
        _ = try await session.push(from: "root", value: value)
        let elapsed = clock.now - start
        _ = try await session.pop(stack: stack, .count(1))
        return elapsed
    }
    baseline = baseline ?? cost
    print("  length \(length):".padding(toLength: 16, withPad: " ", startingAt: 0) + String(format: "%8.2f µs  (%.2f× length 1)", cost, cost / (baseline ?? cost)))
}
