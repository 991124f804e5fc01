/// Work handed to a loop, from its own thread or another.
enum LoopMessage: Sendable {
    /// A connection accepted by another loop, to be owned by this one.
    case adopt(fd: Int32, peer: PeerAddress)
    case respond(Connection, sequence: UInt64, HTTPResponse)
    case startStream(Connection, sequence: UInt64, EventStream, HTTPHeaders)
    /// The stream has bytes queued or a close requested.
    case streamActivity(Connection)
    /// Work placed on this loop through its executor.
    case work(LoopWork)
    case beginShutdown
    /// The drain's deadline: bodies still arriving are refused before the stop.
    case refuseUnfinished
    case stop
}
