import DemoHost
import NavServer

/// `navd`: the demo features on NavServer's `ServerMain` (which also answers `navd openapi`).
@main
enum Navd {
    static func main() {
        ServerMain.run(program: "navd", version: BuildInfo.version, about: ServerConfiguration.navdDescription,
                       settings: DemoSettings(), options: DemoSettings.options) { DemoFeatures.catalog($0, $1) }
    }
}
