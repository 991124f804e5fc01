import SessionStorage
import SQLiteStorage

/// A test's stand-in for a store: a real SQLite store inside, to which everything the stand-in
/// does not change passes, so each stand-in holds only what it changes.
protocol WrappedStore: SessionStorage {
    var inner: SQLiteSessionStore { get }
}

extension WrappedStore {
    func load(within memory: Int, perSession: Int, _ each: (StoredSession) -> Void) throws(StorageError) -> [String] { try inner.load(within: memory, perSession: perSession, each) }
    func close() { inner.close() }
    func statistics() -> StorageStatistics { inner.statistics() }
    func commit(_ writes: [StoreWrite], admissible: @escaping @Sendable () -> Bool,
                completion: @escaping @Sendable (Result<Void, StorageError>) -> Void) {
        inner.commit(writes, admissible: admissible, completion: completion)
    }
}
