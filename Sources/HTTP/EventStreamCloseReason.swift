/// Why an event stream ended.
public enum EventStreamCloseReason: Sendable, Equatable {
    /// The client closed the connection or it failed.
    case clientClosed
    /// More than `streamBufferLimit` bytes were waiting for a client that does not read.
    case tooSlow
    /// The application called `close()` (or the stream could not be opened).
    case closedByServer
    /// The server stopped while the stream was open.
    case shutdown
}
