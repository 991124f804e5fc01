import HTTP
import NavigationCore

/// Sessions live on the server's event loops: a request that arrives on its session's own loop
/// uses the session in place, with no thread switch.
extension LoopExecutor: SessionExecutor {}
