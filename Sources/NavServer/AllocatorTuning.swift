import CGlibcMalloc
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// glibc's allocator keeps a small cache of freed blocks per thread: 7 of each size. navd's event
/// loops free in bursts what another loop allocated (a request handed to its session's loop, the
/// answer handed back), so that cache overflows and every further free takes the allocating
/// arena's lock. With 64 per size, the action benchmark did 5–10% more actions per second at 6%
/// less CPU per action (memory and durable alike), for at most a few MiB more per thread.
///
/// glibc reads the cache's size only when a process starts (`GLIBC_TUNABLES`), so a server
/// started without it starts itself once more, in place (same process id, same name), with it
/// set. Whoever sets `glibc.malloc.tcache_count` themselves is left alone.
enum AllocatorTuning {
    static let tunable = "glibc.malloc.tcache_count"
    static let cacheSize = 64
    /// Set for the second start, which never starts again, whatever glibc made of the tunable.
    static let marker = "NAVD_ALLOCATOR_TUNED"

    /// Returns when there is nothing to do, or when starting again would be unsafe or
    /// impossible (a privileged start, where glibc ignores such tunables; no `/proc`; a binary
    /// replaced on disk since it started): the server then runs with glibc's default.
    static func restartWithLargerThreadCache() {
        #if os(Linux) && canImport(Glibc)
        guard getenv(marker) == nil, getauxval(UInt(AT_SECURE)) == 0 else { return }
        let current = getenv("GLIBC_TUNABLES").map { String(cString: $0) }
        guard !(current.map { mentions($0, tunable) } ?? false), let binary = runningBinary() else { return }
        let tuned = [current, "\(tunable)=\(cacheSize)"].compactMap { $0 }.filter { !$0.isEmpty }.joined(separator: ":")
        guard setenv("GLIBC_TUNABLES", tuned, 1) == 0, setenv(marker, "1", 1) == 0 else { return }
        // The binary's own path, not /proc/self/exe: the process keeps its name (`ps`, `pgrep`).
        execv(binary, CommandLine.unsafeArgv)
        // Still here: the environment goes back to what it was.
        if let current { setenv("GLIBC_TUNABLES", current, 1) } else { unsetenv("GLIBC_TUNABLES") }
        unsetenv(marker)
        #endif
    }

    /// Whether `name` occurs in `text`, on the bytes: `String.contains` would link the regex
    /// library, a megabyte the container image has no room for.
    private static func mentions(_ text: String, _ name: String) -> Bool {
        let (haystack, needle) = (Array(text.utf8), Array(name.utf8))
        guard haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains { haystack[$0..<($0 + needle.count)].elementsEqual(needle) }
    }

    #if os(Linux) && canImport(Glibc)
    /// The file this process runs, if it is still there and is navd itself (not a dynamic
    /// loader that was asked to run navd).
    private static func runningBinary() -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let length = readlink("/proc/self/exe", &buffer, Int(PATH_MAX))
        guard length > 0 else { return nil }
        // On the bytes, as above.
        let path = buffer.prefix(length).map { UInt8(bitPattern: $0) }
        let name = path.split(separator: UInt8(ascii: "/")).last ?? []
        guard !path.reversed().starts(with: " (deleted)".utf8.reversed()), !name.starts(with: "ld-".utf8) else { return nil }
        return String(decoding: path, as: UTF8.self)
    }
    #endif
}
