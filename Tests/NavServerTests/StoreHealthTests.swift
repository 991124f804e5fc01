import Foundation
import NavigationCore
@testable import NavServer
import SessionStorage
import SQLiteStorage
import Synchronization
import Testing

/// A store whose first client write comes back fenced (taken over by another node), answered on
/// the store's writer like any other, so what is asked after it sees it.
private final class FencedOnceStore: WrappedStore {
    let inner: SQLiteSessionStore
    private let fenced = Atomic<Bool>(false)
    /// Set once the writer has taken the first write into a commit: a write submitted after
    /// that goes into a later commit, asked about only once the first is answered.
    let firstTaken = Atomic<Bool>(false)

    init(_ inner: SQLiteSessionStore) { self.inner = inner }

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

/// A store that never commits, whose commit in progress is whatever the test says.
private final class StallingStore: SessionStorage {
    let running = Mutex<Duration?>(nil)
    func load(within memory: Int, perSession: Int, _ each: (StoredSession) -> Void) throws(StorageError) -> [String] { [] }
    func close() {}
    func statistics() -> StorageStatistics { StorageStatistics() }
    func commitRunningFor() -> Duration? { running.withLock { $0 } }
    func commit(_ writes: [StoreWrite], admissible: @escaping @Sendable () -> Bool,
                completion: @escaping @Sendable (Result<Void, StorageError>) -> Void) {}
}

/// The log hears each change of the store's health once, in order: a failure unless one is
/// reported already, a stall only while all was well (a failing store's probes may hang too),
/// and the end of either only from a commit that worked.
@Suite struct StoreHealthLogTests {
    @Test func eachChangeOfHealthIsReportedOnceAndOnlyACommitThatWorksEndsIt() {
        let store = StallingStore()
        let persistence = SessionPersistence(storage: store)
        let heard = Mutex<[String]>([])
        persistence.onHealthChange { change in
            let line = switch change {
            case .failing: "failing"
            case .stalled: "stalled"
            case .recovered: "recovered"
            }
            heard.withLock { $0.append(line) }
        }
        let failure = Result<Void, StorageError>.failure(.unavailable("disk full"))
        let stall = { (on: Bool) in store.running.withLock { $0 = on ? .seconds(6) : nil } }

        #expect(!persistence.noted(failure))
        #expect(!persistence.noted(failure))
        stall(true)
        persistence.watchForStall()
        #expect(!persistence.isAvailable)
        stall(false)
        persistence.watchForStall()
        #expect(persistence.noted(.success(())))
        #expect(persistence.noted(.success(())))
        stall(true)
        persistence.watchForStall()
        persistence.watchForStall()
        #expect(!persistence.isAvailable)
        stall(false)
        // The stalled commit is over, but not yet answered: nothing is said until it is.
        persistence.watchForStall()
        #expect(persistence.isAvailable)
        #expect(persistence.noted(.success(())))
        stall(true)
        persistence.watchForStall()
        stall(false)
        #expect(!persistence.noted(failure))
        #expect(persistence.noted(.success(())))
        #expect(heard.withLock { $0 } == ["failing", "recovered", "stalled", "recovered", "stalled", "failing", "recovered"])
    }
}

/// A store whose copies end only when the test says so.
private final class HeldBackupStore: WrappedStore, BackupStorage {
    let inner: SQLiteSessionStore
    let held = Mutex<[@Sendable (Result<StoreBackup, StorageError>) -> Void]>([])

    init(_ inner: SQLiteSessionStore) { self.inner = inner }

    func backUp(into directory: String, completion: @escaping @Sendable (Result<StoreBackup, StorageError>) -> Void) {
        held.withLock { $0.append(completion) }
    }
    func newestBackup(in directory: String) -> Int? { 1_700_000_000 }
}

/// Copies asked for while one is under way are skipped, not failed: counted apart, so an alert
/// on failures does not fire for a cron job's retry. The newest copy from before the process
/// counts as the last one written.
@Suite struct BackupCountTests {
    @Test func aCopyAskedForWhileOneIsUnderWayIsSkippedAndCountedApart() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("navd-backups-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = HeldBackupStore(try SQLiteSessionStore(directory: directory, retention: .init(count: 16, bytes: 1 << 20)))
        defer { store.close() }
        let persistence = SessionPersistence(storage: store)
        persistence.noteEarlierBackups(in: directory)
        #expect(persistence.renderMetrics().contains("navd_store_last_backup_timestamp_seconds 1700000000\n"))
        let outcomes = Mutex<[Bool]>([])
        let record: @Sendable (Result<StoreBackup, StorageError>) -> Void = { result in
            outcomes.withLock { $0.append((try? result.get()) != nil) }
        }
        #expect(persistence.backUp(into: directory, completion: record) == .started)
        #expect(persistence.backUp(into: directory, completion: record) == .alreadyUnderWay)
        #expect(persistence.backUp(into: directory, completion: record) == .alreadyUnderWay)
        let first = try #require(store.held.withLock { $0.first })
        first(.success(StoreBackup(path: directory + "/navd-x.sqlite3", bytes: 1)))
        #expect(persistence.backUp(into: directory, completion: record) == .started, "the next one once it ended")
        store.held.withLock { $0.last }?(.failure(.unavailable("disk full")))
        #expect(outcomes.withLock { $0 } == [true, false])
        let metrics = persistence.renderMetrics()
        for sample in [#"navd_store_backups_total{result="written"} 1"#, #"navd_store_backups_total{result="failed"} 1"#,
                       #"navd_store_backups_total{result="skipped"} 2"#] {
            #expect(metrics.contains(sample + "\n"), "\(sample)")
        }
        #expect(!metrics.contains("navd_store_last_backup_timestamp_seconds 1700000000\n"), "the copy just written is newer")
    }
}
