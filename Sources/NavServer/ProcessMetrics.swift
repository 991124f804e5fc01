#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import HTTP

/// The standard `process_*` metrics every Prometheus client exports, read at each scrape. On
/// Linux they come from `/proc/self`; elsewhere only CPU time (from `getrusage`) is exported.
enum ProcessMetrics {
    static func render(into out: inout PrometheusExposition) {
        func sample(_ name: String, _ type: String, _ help: String, _ value: String) {
            out.family(name, type, help)
            out.sample(name, value)
        }
        #if os(Linux)
        let ticks = Double(max(1, sysconf(Int32(_SC_CLK_TCK))))
        if let stat = SelfStat.read() {
            sample("process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.",
                   "\(Double(stat.userTicks + stat.systemTicks) / ticks)")
            sample("process_resident_memory_bytes", "gauge", "Resident memory size, in bytes.",
                   "\(stat.residentPages * max(1, sysconf(Int32(_SC_PAGESIZE))))")
            sample("process_virtual_memory_bytes", "gauge", "Virtual memory size, in bytes.", "\(stat.virtualBytes)")
        }
        if let start = startTime {
            sample("process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch, in seconds.", "\(start)")
        }
        if let open = openFileDescriptors() {
            sample("process_open_fds", "gauge", "Open file descriptors.", "\(open)")
        }
        var limit = rlimit()
        if getrlimit(openFileLimit, &limit) == 0, limit.rlim_cur != .max {  // .max: RLIM_INFINITY
            sample("process_max_fds", "gauge", "The limit of open file descriptors.", "\(limit.rlim_cur)")
        }
        #else
        var usage = rusage()
        if getrusage(RUSAGE_SELF, &usage) == 0 {
            func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
            sample("process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.",
                   "\(seconds(usage.ru_utime) + seconds(usage.ru_stime))")
        }
        #endif
    }

    #if os(Linux)

    /// The fields of `/proc/self/stat` that the metrics use.
    struct SelfStat {
        var userTicks: Int
        var systemTicks: Int
        var startTicks: Int
        var virtualBytes: Int
        var residentPages: Int

        static func read() -> SelfStat? {
            guard let text = ProcessMetrics.contents(of: "/proc/self/stat") else { return nil }
            return parse(text)
        }

        /// The command name (field 2) may hold spaces and parentheses: fields are counted from
        /// the last `)`. Field 3 (state) is then the first.
        static func parse(_ text: String) -> SelfStat? {
            guard let close = text.lastIndex(of: ")") else { return nil }
            let fields = text[text.index(after: close)...].split(separator: " ")
            func field(_ number: Int) -> Int? {
                let index = number - 3
                return index < fields.count ? Int(fields[index]) : nil
            }
            guard let user = field(14), let system = field(15), let start = field(22),
                  let virtual = field(23), let resident = field(24) else { return nil }
            return SelfStat(userTicks: user, systemTicks: system, startTicks: start, virtualBytes: virtual, residentPages: resident)
        }
    }

    /// Boot time (`btime` in `/proc/stat`) plus the process's start in clock ticks after boot.
    /// It never changes, so it is read once.
    static let startTime: Double? = {
        guard let stat = SelfStat.read(), let text = contents(of: "/proc/stat"),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("btime ") }),
              let boot = Int(line.dropFirst("btime ".count)) else { return nil }
        return Double(boot) + Double(stat.startTicks) / Double(max(1, sysconf(Int32(_SC_CLK_TCK))))
    }()

    /// The entries of `/proc/self/fd`, less the one reading it takes.
    static func openFileDescriptors() -> Int? {
        guard let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let isDot = withUnsafeBytes(of: entry.pointee.d_name) { $0.first == UInt8(ascii: ".") }
            if !isDot { count += 1 }
        }
        return max(0, count - 1)
    }

    /// A small file of `/proc`, at most 1 MiB.
    static func contents(of path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < 1 << 20 {
            let count = chunk.withUnsafeMutableBytes { readDescriptor(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                bytes += chunk[0..<count]
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
    #endif
}

/// `RLIMIT_NOFILE` as `getrlimit` takes it (a typed enum on glibc, an Int32 macro on Darwin).
#if os(Linux)
private let openFileLimit = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#else
private let openFileLimit = RLIMIT_NOFILE
#endif
