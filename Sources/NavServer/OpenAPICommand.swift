#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// `<program> openapi [--output FILE]`: the API document with the hosted features' state
/// schemas, made from their declarations exactly as the running server serves it at
/// `GET /openapi.yaml`, without starting one: a build can commit it or generate a client from it.
enum OpenAPICommand {
    static let name = "openapi"
    static let usageLine = "openapi [--output FILE]"

    /// Writes `server`'s document to FILE (replaced whole, never left half-written) or to
    /// standard output; the exit code (2 for a usage to fix).
    static func run(program: String, arguments: [String], server: NavigationServer) -> Int32 {
        guard arguments.isEmpty || (arguments.count == 2 && arguments[0] == "--output") else {
            StandardStream.error.writeLine("usage: \(program) \(usageLine)")
            return 2
        }
        let document = server.openAPIDocument
        guard arguments.count == 2 else {
            print(document, terminator: "")
            return 0
        }
        let path = arguments[1], temporary = path + ".tmp"
        guard let file = fopen(temporary, "w") else {
            StandardStream.error.writeLine("\(program): cannot write \(temporary)")
            return 1
        }
        let written = fputs(document, file) >= 0
        guard fclose(file) == 0, written, rename(temporary, path) == 0 else {
            unlink(temporary)
            StandardStream.error.writeLine("\(program): cannot write \(path)")
            return 1
        }
        return 0
    }
}
