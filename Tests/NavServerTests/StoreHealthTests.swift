import Foundation
import NavigationCore
@testable import NavServer
import SessionStorage
import SQLiteStorage
import Synchronization
import Testing

/// A store whose first client write comes back fenced (taken over by another node), answered on
/// the store's writer like any other, so what is asked after it sees it.
private final class FencedOnceStore: SessionStorage {
    let inner: SQLiteSessionStore
    private let fenced = Atomic<Bool>(false)
    /// Set once the writer has taken the first write into a commit: a write submitted after
    /// that goes into a later commit, asked about only once the first is answered.
    let firstTaken = Atomic<Bool>(false)

    init(_ inner: SQLiteSessionStore) { self.inner = inner }

    func load(_ each: (StoredSession) -> Void) throws(StorageError) -> [String] { try inner.load(each) }
    func close() { inner.close() }
    func statistics() -> StorageStatistics { inner.statistics() }

    func commit(_ writes: [StoreWrite], admissible: @escaping @Sendable () -> Bool,
                completion: @escaping @Sendable (Result<Void, StorageError>) -> Void) {
        let fenceThis = !fenced.exchange(true, ordering: .relaxed)
        inner.commit(writes, admissible: { [self] in
            defer { if fenceThis { firstTaken.store(true, ordering: .releasing) } }
            return admissible()
        }) { result in
            completion(fenceThis ? .failure(.fenced("a")) : result)
        }
    }
}

/// `/readyz` and `navd_store_available` say whether the store takes writes: a session's write
/// that the store refused for that session alone, or that was never sent, says nothing of it.
@Suite struct StoreHealthTests {
    @Test func aWriteRefusedBehindAFencedWriteLeavesTheStoreAvailable() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("navd-health-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = FencedOnceStore(try SQLiteSessionStore(directory: directory, retention: .init(count: 16, bytes: 1 << 20)))
        defer { store.close() }
        let persistence = SessionPersistence(storage: store)
        let journal = try #require(persistence.journal(for: "a", epoch: nil))
        let entry = { (version: Int) in
            JournalEntry(version: version, lastSequence: version, nextSerial: 1, events: [], statePatch: .array([]), snapshot: nil)
        }
        let outcomes = Mutex<[Int: Bool]>([:])
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let answered = Atomic<Int>(0)
            for version in 1...2 {
                // Both of one generation: the second is a patch on the first, so it is refused unsent.
                if version == 2 { while !store.firstTaken.load(ordering: .acquiring) { usleep(1_000) } }
                journal.write([entry(version)], generation: 1) { written in
                    outcomes.withLock { $0[version] = written }
                    if answered.add(1, ordering: .relaxed).newValue == 2 { done.resume() }
                }
            }
        }
        #expect(outcomes.withLock { $0 } == [1: false, 2: false])
        #expect(persistence.isAvailable, "a fenced write and the one refused behind it are no fault of the store")
    }
}
