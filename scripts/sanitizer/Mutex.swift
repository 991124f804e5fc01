// Copied into every module of navd's ThreadSanitizer build by scripts/sanitizer-test.sh; never part
// of navd itself. Synchronization's Mutex waits for a contended lock with a futex call inside the
// Swift runtime, which ThreadSanitizer does not see, so to it every contended lock hands its
// value over unordered: a race reported for each. This Mutex, declared in the module and so
// preferred to the imported one, locks with pthread_mutex, which ThreadSanitizer does see. It
// has the part of the API navd uses (`withLock`).
#if canImport(Glibc)
import Glibc
#endif

final class RaceTestLockedValue<Value: ~Copyable>: @unchecked Sendable {
    let lock = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    var value: Value

    init(_ value: consuming Value) {
        self.value = value
        pthread_mutex_init(lock, nil)
    }

    deinit {
        pthread_mutex_destroy(lock)
        lock.deallocate()
    }
}

struct Mutex<Value: ~Copyable>: ~Copyable, @unchecked Sendable {
    private let locked: RaceTestLockedValue<Value>

    init(_ initialValue: consuming sending Value) {
        locked = RaceTestLockedValue(initialValue)
    }

    borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        pthread_mutex_lock(locked.lock)
        defer { pthread_mutex_unlock(locked.lock) }
        // The lock makes the value the caller's alone while `body` runs.
        nonisolated(unsafe) let held = locked
        return try body(&held.value)
    }
}
