import CGlibcMalloc
import Synchronization

/// Gives the memory of ended sessions back to the system.
///
/// glibc keeps freed memory in its heap, and after a large block is freed it raises the size
/// from which blocks get their own mapping, so a few sessions full of large events would keep
/// their pages long after they ended. Large blocks keep their own mapping here (freed means
/// unmapped), and after sessions end the heap is trimmed, at most once per housekeeping round.
final class MemoryReturn: Sendable {
    private let sessionsEnded = Atomic<Bool>(false)

    init() {
        #if os(Linux) && canImport(Glibc)
        _ = mallopt(M_MMAP_THRESHOLD, 128 * 1024)
        #endif
    }

    func sessionEnded() { sessionsEnded.store(true, ordering: .relaxed) }

    /// Called by housekeeping: trims only if a session ended since the last call.
    func returnIfSessionsEnded() {
        guard sessionsEnded.exchange(false, ordering: .relaxed) else { return }
        #if os(Linux) && canImport(Glibc)
        _ = malloc_trim(0)
        #endif
    }
}
