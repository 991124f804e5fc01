import DemoHost
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import NavServer

/// `navd`: the demo features on NavServer's `ServerMain`, and `navd openapi`.
@main
enum Navd {
    static func main() {
        if CommandLine.arguments.dropFirst().first == "openapi" {
            exit(writeOpenAPIDocument(Array(CommandLine.arguments.dropFirst(2))))
        }
        ServerMain.run(program: "navd", version: BuildInfo.version, about: ServerConfiguration.navdDescription,
                       settings: DemoSettings(), options: DemoSettings.options) { DemoFeatures.catalog($0, $1) }
    }

    /// `navd openapi [--output FILE]`: the API document with the demo features' state schemas,
    /// made from their declarations exactly as a running navd serves it at `GET /openapi.yaml`;
    /// written to FILE (replaced whole, never left half-written) or to standard output.
    /// The committed `openapi.yaml` is this command's output, and a test keeps it so.
    private static func writeOpenAPIDocument(_ arguments: [String]) -> Int32 {
        guard arguments.isEmpty || (arguments.count == 2 && arguments[0] == "--output") else {
            StandardStream.error.writeLine("usage: navd openapi [--output FILE]")
            return 2
        }
        let server = NavigationServer(configuration: ServerConfiguration()) { DemoFeatures.catalog(DemoSettings(), $0) }
        let document = server.openAPIDocument
        guard arguments.count == 2 else {
            print(document, terminator: "")
            return 0
        }
        let path = arguments[1], temporary = path + ".tmp"
        guard let file = fopen(temporary, "w") else {
            StandardStream.error.writeLine("navd: cannot write \(temporary)")
            return 1
        }
        let written = fputs(document, file) >= 0
        guard fclose(file) == 0, written, rename(temporary, path) == 0 else {
            unlink(temporary)
            StandardStream.error.writeLine("navd: cannot write \(path)")
            return 1
        }
        return 0
    }
}
