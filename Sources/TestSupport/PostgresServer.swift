#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Foundation
import Synchronization

/// A private PostgreSQL for tests: a fresh cluster in a temporary directory, listening on a
/// loopback port only, started once per test process and stopped when it exits. Each test
/// takes a database of its own, so tests do not see each other's rows.
///
/// PostgreSQL refuses to run as root: as root, the cluster belongs to the `postgres` user (or
/// `nobody`) and its programs run through `runuser`.
public final class PostgresServer: Sendable {
    /// Why no server could be started (no PostgreSQL installed, no user to run it as).
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    public let port: Int
    private let directory: String
    private let binaries: String
    private let user: String?
    /// Whether it takes TLS connections (`ssl=on`, with a self-signed certificate).
    private let tls: Bool

    /// The server of this test process, started on first use.
    public static func shared() throws -> PostgresServer {
        try started.get()
    }

    private static let started: Result<PostgresServer, Unavailable> = {
        let result = Result { () throws(Unavailable) -> PostgresServer in try PostgresServer() }
        if case .success = result { atexit { try? PostgresServer.started.get().stop() } }
        return result
    }()

    /// Whether a server can be started here, for `.enabled(if:)`.
    public static var isAvailable: Bool { (try? shared()) != nil }

    /// A new, empty database on the shared server, as a libpq URL.
    public static func freshDatabase() throws -> String {
        let server = try shared()
        let name = "navd_" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "")
        try server.run("createdb", ["-h", "127.0.0.1", "-p", String(server.port), "-U", "navd", name])
        return server.url(database: name)
    }

    public func url(database: String) -> String {
        "postgresql://navd@127.0.0.1:\(port)/\(database)"
    }

    /// The first column of each row `sql` returns in `database`, as psql prints it.
    public func query(_ sql: String, database: String) throws -> [String] {
        let output = try run("psql", ["-h", "127.0.0.1", "-p", String(port), "-U", "navd", "-d", database, "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1", "-c", sql])
        return output.split(separator: "\n").map(String.init)
    }

    /// A server of the caller's own, which it may crash and restart (`crashAndRestart`); the
    /// caller stops it. With `tls`, it also takes TLS connections (`sslmode=require`).
    public static func ownServer(tls: Bool = false) throws -> PostgresServer {
        try PostgresServer(tls: tls)
    }

    private init(tls: Bool = false) throws(Unavailable) {
        self.tls = tls
        guard let binaries = Self.findBinaries() else {
            throw Unavailable(description: "no PostgreSQL server programs (initdb, pg_ctl) found; install the Debian package postgresql")
        }
        self.binaries = binaries
        let user: String?
        if geteuid() == 0 {
            guard let named = ["postgres", "nobody"].first(where: { (name: String) in getpwnam(name) != nil }) else {
                throw Unavailable(description: "running as root and no postgres or nobody user to run PostgreSQL as")
            }
            user = named
        } else {
            user = nil
        }
        self.user = user
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("navd-pg-\(UUID().uuidString)").path
        self.directory = directory
        do {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            if let user, let entry = getpwnam(user) {
                guard chown(directory, entry.pointee.pw_uid, entry.pointee.pw_gid) == 0 else {
                    throw Unavailable(description: "cannot give \(directory) to \(user)")
                }
            }
            try Self.run("initdb", ["-D", directory + "/data", "-A", "trust", "-U", "navd", "--no-sync", "-E", "UTF8", "--locale", "C"], binaries: binaries, user: user)
            if tls { try Self.makeCertificate(in: directory + "/data", user: user) }
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw Unavailable(description: "initdb failed: \(error)")
        }
        // A random port, tried again on a clash with another process.
        var lastError: (any Error)?
        for _ in 0..<5 {
            let candidate = Int.random(in: 20_000...60_000)
            do {
                try Self.start(directory: directory, port: candidate, binaries: binaries, user: user, tls: tls)
                port = candidate
                return
            } catch {
                lastError = error
            }
        }
        let log = (try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? ""
        try? FileManager.default.removeItem(atPath: directory)
        throw Unavailable(description: "pg_ctl start failed: \(lastError.map { "\($0)" } ?? "") \(log.suffix(500))")
    }

    private static func start(directory: String, port: Int, binaries: String, user: String?, tls: Bool) throws {
        try run("pg_ctl", ["-D", directory + "/data", "-l", directory + "/log", "-w", "-t", "30", "-o",
                           "-c listen_addresses=127.0.0.1 -p \(port) -k \(directory) -c max_connections=200" + (tls ? " -c ssl=on" : ""),
                           "start"],
                binaries: binaries, user: user)
    }

    /// A self-signed certificate for `ssl=on` in the cluster's directory, made by the openssl
    /// program; owned by the server's user, the key readable by it alone, as PostgreSQL demands.
    private static func makeCertificate(in data: String, user: String?) throws(Unavailable) {
        let openssl = Process()
        openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        openssl.arguments = ["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=127.0.0.1",
                             "-keyout", data + "/server.key", "-out", data + "/server.crt"]
        openssl.standardOutput = FileHandle.nullDevice
        openssl.standardError = FileHandle.nullDevice
        do { try openssl.run() } catch { throw Unavailable(description: "cannot run openssl: \(error)") }
        openssl.waitUntilExit()
        guard openssl.terminationStatus == 0 else { throw Unavailable(description: "openssl req failed") }
        for file in ["server.key", "server.crt"] {
            let path = data + "/" + file
            if let user, let entry = getpwnam(user) { _ = chown(path, entry.pointee.pw_uid, entry.pointee.pw_gid) }
            _ = chmod(path, 0o600)
        }
    }

    /// Stops the server as a crash does (every process killed, nothing flushed that was not
    /// already) and starts it again on the same port, which recovers from its log.
    public func crashAndRestart() throws {
        try run("pg_ctl", ["-D", directory + "/data", "-m", "immediate", "stop"])
        try Self.start(directory: directory, port: port, binaries: binaries, user: user, tls: tls)
    }

    /// Stops the server at once (no checkpoint: the cluster is thrown away) and removes it.
    public func stop() {
        _ = try? run("pg_ctl", ["-D", directory + "/data", "-m", "immediate", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    private static func findBinaries() -> String? {
        var candidates: [String] = []
        if let configured = ProcessInfo.processInfo.environment["NAVD_PG_BIN"] { candidates.append(configured) }
        let versions = (try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        candidates += versions.compactMap(Int.init).sorted(by: >).map { "/usr/lib/postgresql/\($0)/bin" }
        candidates += ["/usr/local/bin", "/usr/bin"]
        return candidates.first { directory in
            ["initdb", "pg_ctl", "postgres", "createdb", "psql"].allSatisfy { FileManager.default.isExecutableFile(atPath: directory + "/" + $0) }
        }
    }

    /// Runs one of the server's programs (as its user when root); its standard output.
    @discardableResult
    private func run(_ program: String, _ arguments: [String]) throws -> String {
        try Self.run(program, arguments, binaries: binaries, user: user)
    }

    /// posix_spawn and waitpid, not Foundation's Process: the server that `pg_ctl start`
    /// leaves running must not keep the caller waiting. Output goes to files, not pipes, for
    /// the same reason.
    @discardableResult
    private static func run(_ program: String, _ arguments: [String], binaries: String, user: String?) throws -> String {
        let command = user.map { ["/usr/sbin/runuser", "-u", $0, "--", binaries + "/" + program] } ?? [binaries + "/" + program]
        let capture = FileManager.default.temporaryDirectory.appendingPathComponent("navd-pg-run-\(UUID().uuidString)").path
        defer {
            unlink(capture + ".out")
            unlink(capture + ".err")
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, capture + ".out", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, capture + ".err", O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        var argv = (command + arguments).map { strdup($0) }
        defer { argv.forEach { free($0) } }
        argv.append(nil)
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, command[0], &actions, nil, argv, environ)
        guard spawned == 0 else { throw Unavailable(description: "cannot run \(command[0]): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
        let printed = FileManager.default.contents(atPath: capture + ".out") ?? Data()
        let complaint = FileManager.default.contents(atPath: capture + ".err") ?? Data()
        // Exited normally with status 0: the low seven bits are the signal, the next eight the code.
        guard status & 0x7F == 0, (status >> 8) & 0xFF == 0 else {
            throw Unavailable(description: "\(program) failed (wait status \(status)): \(String(decoding: complaint, as: UTF8.self))")
        }
        return String(decoding: printed, as: UTF8.self)
    }
}
