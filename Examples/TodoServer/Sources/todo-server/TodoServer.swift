import NavServer
import Todo

/// Serves the to-do feature with navd's server library: same flags as `navd`
/// (`--port`, `--store`, `--data-dir`, ...), sessions kept across restarts, a graceful
/// shutdown on SIGTERM.
@main
enum TodoServer {
    static func main() {
        ServerMain.run(program: "todo-server", version: "1.0.0", about: ["todo-server: a to-do list served by navd's library."]) { _ in
            TodoFeature.catalog()
        }
    }
}
