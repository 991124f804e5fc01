#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The memory navd may use: the machine's, or less where its control group says so (a
/// container's `--memory`, a systemd unit's `MemoryMax=`). Past it the kernel ends the process,
/// and a durable store brings every session back into a restart that would fill it again, so
/// the sessions' default budget is a share of it rather than of the machine.
enum AvailableMemory {
    /// The default for `--max-session-memory`: a quarter. The budget counts state as JSON and
    /// events as encoded, and navd's resident memory runs 1.2 to 2.6 times that with the models,
    /// events' values and a durable store's copies that go with them (measured on 2026-11-29:
    /// 1.2 for state and 2.0 for events in memory, 2.1 and 2.6 with SQLite), which leaves room
    /// for connections, the store and what the allocator keeps.
    static var sessionShare: Int { max(1 << 20, bytes / 4) }

    /// The default for `--max-output-buffer`, and for `--max-input-buffer`: an eighth. Past it
    /// only clients that read nothing (or stopped sending a body) are cut, and they resume or
    /// send again, so it can be tighter than the sessions' share.
    static var outputShare: Int { max(1 << 20, bytes / 8) }

    /// Read once: neither changes while navd runs, and the control group's files are read
    /// for each default.
    static let bytes: Int = {
        let pages = sysconf(Int32(_SC_PHYS_PAGES)), pageSize = sysconf(Int32(_SC_PAGESIZE))
        let product = pages.multipliedReportingOverflow(by: pageSize)
        let physical = pages > 0 && pageSize > 0 && !product.overflow ? product.partialValue : Int.max
        return min(physical, controlGroupLimit() ?? .max)
    }()

    /// The limit of the control group navd runs in (v2's `memory.max`, else v1's
    /// `memory.limit_in_bytes`); nil where there is none.
    static func controlGroupLimit() -> Int? {
        #if os(Linux)
        controlGroupLimit(membership: ProcessMetrics.contents(of: "/proc/self/cgroup"), reading: ProcessMetrics.contents(of:))
        #else
        nil
        #endif
    }

    /// The limit of the group `membership` (`/proc/self/cgroup`) names, with files read by `read`.
    /// Its "0::/path" line names the v2 group, an "N:memory:/path" line the v1 memory group;
    /// inside a container's namespace the path is "/".
    static func controlGroupLimit(membership: String?, reading read: (String) -> String?) -> Int? {
        guard let membership else { return nil }
        func group(of controller: String) -> String? {
            for line in membership.split(separator: "\n") {
                let fields = line.split(separator: ":", maxSplits: 2, omittingEmptySubsequences: false)
                guard fields.count == 3, controller.isEmpty ? fields[1].isEmpty : fields[1].split(separator: ",").contains(Substring(controller))
                else { continue }
                return fields[2] == "/" ? "" : String(fields[2])
            }
            return nil
        }
        if let path = group(of: ""), let text = read("/sys/fs/cgroup\(path)/memory.max") { return limit(text) }
        if let path = group(of: "memory"), let text = read("/sys/fs/cgroup/memory\(path)/memory.limit_in_bytes") { return limit(text) }
        return nil
    }

    /// A limit file's number; nil for `max` (no limit) or what is not one.
    static func limit(_ text: String) -> Int? {
        text.split(separator: "\n").first.flatMap { Int($0.trimmingSpaces) }.flatMap { $0 > 0 ? $0 : nil }
    }
}
