import SQLiteStorage

/// `<program> restore FILE [--data-dir DIR]`: puts a copy of the store (what SIGUSR1 wrote) in
/// place as the store of DIR (`--data-dir`, else `NAVD_DATA_DIR`, else `./navd-data`), for the
/// next start to serve. Refuses a directory that holds a store or what is left of one, rather
/// than leave its log to be read into the copy (`SQLiteSessionStore.restore`).
enum RestoreCommand {
    static let name = "restore"
    static let usageLine = "restore FILE [--data-dir DIR]"

    /// The exit code: 0 once the store is in place, 2 for a usage to fix or a copy that cannot
    /// be restored there.
    static func run(program: String, arguments: [String], environment: [String: String]) -> Int32 {
        var file: String?
        var directory = environment["NAVD_DATA_DIR"].flatMap { $0.isEmpty ? nil : $0 } ?? ServerConfiguration().dataDirectory
        var rest = arguments[...]
        while let argument = rest.popFirst() {
            if argument == "--data-dir", let value = rest.popFirst(), !value.isEmpty {
                directory = value
            } else if argument.hasPrefix("--data-dir="), argument.count > "--data-dir=".count {
                directory = String(argument.dropFirst("--data-dir=".count))
            } else if !argument.hasPrefix("-"), file == nil {
                file = argument
            } else {
                file = nil
                break
            }
        }
        guard let file, !file.isEmpty else {
            StandardStream.error.writeLine("usage: \(program) \(usageLine)")
            return 2
        }
        do {
            let path = try SQLiteSessionStore.restore(file, into: directory)
            print("\(program): restored \(file) as \(path); start \(program) with --data-dir \(directory)")
            return 0
        } catch .cannotOpen(let reason) {
            // The copy, not a store being opened: its reason names the file or directory at fault.
            StandardStream.error.writeLine("\(program): cannot restore \(file): \(reason)")
            return 2
        } catch {
            StandardStream.error.writeLine("\(program): cannot restore \(file): \(error)")
            return 2
        }
    }
}
