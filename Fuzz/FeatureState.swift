import Dispatch
import Features
import NavigationCore
import Synchronization

/// A deep link into every hostable feature: the first byte picks the feature from the catalog
/// navd hosts (`FeatureSet`), the rest is the JSON state a client sends. It goes the ways a
/// client's state goes: `POST /sessions` (`makeSession`) and `PUT …/state` into a running
/// session (`replaceState`), which decode it through the screens' codecs, children and nested
/// destinations included, and build the navigation tree from it.
///
/// Both ways must agree on whether the state is valid and on the state that results; the state
/// a session reports must be accepted back unchanged; a second `replaceState` with the same
/// state (now updating the models in place) changes nothing; and the session as it is stored
/// comes back from a restart (`restoreSession`) with the same state and tree.
/// The catalog is built once, before the first input, with leak checking off: it lives as long
/// as the process, and LeakSanitizer cannot follow Swift's references held in multi-payload
/// enums (a schema's cases keep their tag in the pointer's spare bits), so it would call the
/// declarations leaked. Every allocation made for an input is still checked.
@_cdecl("LLVMFuzzerInitialize")
public func initializeFeatureState(_ argc: UnsafeMutablePointer<Int32>, _ argv: UnsafeMutableRawPointer) -> Int32 {
    leakCheckingOff()
    _ = catalog.hosts.count
    leakCheckingOn()
    return 0
}

@_silgen_name("__lsan_disable") private func leakCheckingOff()
@_silgen_name("__lsan_enable") private func leakCheckingOn()

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzFeatureState(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    guard size > 0 else { return 0 }
    let host = catalog.hosts[Int(data[0]) % catalog.hosts.count].name
    guard let state = try? JSONParser.parse(Array(UnsafeBufferPointer(start: data + 1, count: size - 1))) else { return 0 }

    let created = try? catalog.makeSession(feature: host, state: state)
    let running = catalog.existingSession(host)
    let replaced = wait { try? await running.replaceState(state) }
    guard (created == nil) == (replaced == nil) else {
        fatalError("\(host): a deep link \(created == nil ? "refused" : "accepted") by POST /sessions is \(replaced == nil ? "refused" : "accepted") by PUT state: \(state.text)")
    }
    guard let created else { return 0 }

    let reported = wait { await created.describe().state }
    let replacedState = wait { await running.describe().state }
    guard replacedState == reported else {
        fatalError("\(host): PUT state gives \(replacedState.text), POST /sessions \(reported.text), for \(state.text)")
    }
    guard wait({ try? await running.replaceState(state) }) != nil, wait({ await running.describe().state }) == reported else {
        fatalError("\(host): the same state put again changed the session: \(state.text)")
    }
    guard let again = try? catalog.makeSession(feature: host, state: reported) else {
        fatalError("\(host): the state a session reports is refused as a deep link: \(reported.text)")
    }
    let reportedAgain = wait { await again.describe().state }
    guard reportedAgain == reported else {
        fatalError("\(host): a reported state changes when linked again: \(reported.text) became \(reportedAgain.text)")
    }

    let stored = wait { await created.makeDurable(journal: Discarded()) }
    guard let restored = try? catalog.restoreSession(feature: host, stored, events: [], journal: Discarded()) else {
        fatalError("\(host): a stored session does not come back: \(stored.state.text)")
    }
    let (_, restoredState, restoredTree) = wait { await restored.describe() }
    guard restoredState == stored.state, restoredTree == stored.navigation else {
        fatalError("\(host): a restored session differs: \(restoredState.text) \(restoredTree.text), stored \(stored.state.text) \(stored.navigation.text)")
    }
    return 0
}

/// A journal that keeps nothing: the harness restores from the snapshot `makeDurable` returns.
private struct Discarded: SessionJournal {
    func write(_ entries: [JournalEntry], generation: Int, completion: @escaping @Sendable (Bool) -> Void) { completion(true) }
}

/// The catalog navd hosts, with a fact service that is never asked (decoding fetches nothing)
/// and a wall clock that stands still: a deep link is settled as it lands, against the clock (a
/// timed alert's deadline), and the two ways it lands must meet the same moment to agree.
private let catalog = FeatureSet.catalog(FeatureDependencies(factClient: NoFacts(), connectDelay: .zero, alertDismissDelay: .zero,
                                                             wallClock: { 1_800_000_000 }))

private struct NoFacts: FactClient {
    func fact(about number: Int) async throws(FactError) -> String { throw .cancelled }
}

extension FeatureCatalog {
    /// A session in its default state, as `POST /sessions` without a state makes it.
    fileprivate func existingSession(_ feature: String) -> NavigationSession {
        guard let session = try? makeSession(feature: feature, state: nil) else {
            fatalError("\(feature): no default session")
        }
        return session
    }
}

/// Runs an actor call from libFuzzer's synchronous callback and waits for its result.
private func wait<Result: Sendable>(_ operation: @escaping @Sendable () async -> Result) -> Result {
    let box = ResultBox<Result>()
    let done = DispatchSemaphore(value: 0)
    Task {
        let result = await operation()
        box.value.withLock { $0 = result }
        done.signal()
    }
    done.wait()
    guard let result = box.value.withLock({ $0 }) else { fatalError("no result") }
    return result
}

private final class ResultBox<Value: Sendable>: Sendable {
    let value = Mutex<Value?>(nil)
}
