/// What the HTTP layer refuses on its own, before or instead of the handler, in HTTP's terms: a
/// kind, its status and a sentence for people. How a refusal is written (its body, its headers)
/// is the handler's business (`HTTPHandler.response(to:)`); the connection is always closed
/// after it.
public struct ProtocolError: Error, Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// Malformed HTTP.
        case badRequest
        /// A transfer coding other than chunked.
        case notImplemented
        /// Not HTTP/1.x.
        case versionNotSupported
        /// The request line is over its limit.
        case uriTooLong
        /// The header section is over its limit.
        case headersTooLarge
        /// The body is (or declares itself) over its limit.
        case payloadTooLarge
        /// The head or the body did not arrive in time.
        case requestTimeout
        /// The connection is over `maxConnections`: answered at once, its request unread.
        case overCapacity
        /// The connection was still waiting to be accepted when shutdown began: answered at
        /// once, its request unread.
        case shuttingDown
        /// The handler did not answer, or answered with an invalid status.
        case internalError
    }

    public let kind: Kind
    /// What went wrong, for people.
    public let message: String

    public var status: Int {
        switch kind {
        case .badRequest: 400
        case .notImplemented: 501
        case .versionNotSupported: 505
        case .uriTooLong: 414
        case .headersTooLarge: 431
        case .payloadTooLarge: 413
        case .requestTimeout: 408
        case .overCapacity, .shuttingDown: 503
        case .internalError: 500
        }
    }

    init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    static func badRequest(_ message: String) -> ProtocolError { ProtocolError(.badRequest, message) }
    static func notImplemented(_ message: String) -> ProtocolError { ProtocolError(.notImplemented, message) }
    static func internalError(_ message: String) -> ProtocolError { ProtocolError(.internalError, message) }

    static let requestTimeout = ProtocolError(.requestTimeout, "The request did not arrive in time.")
    static let uriTooLong = ProtocolError(.uriTooLong, "The request line is too long.")
    static let headersTooLarge = ProtocolError(.headersTooLarge, "The request header section is too large.")
    static let payloadTooLarge = ProtocolError(.payloadTooLarge, "The request body is too large.")
    static let overCapacity = ProtocolError(.overCapacity, "The server has too many open connections.")
    static let bodiesOverCapacity = ProtocolError(.overCapacity, "The server is receiving too many request bodies at once; try again shortly.")
    static let shuttingDown = ProtocolError(.shuttingDown, "The server is shutting down.")
    static let versionNotSupported = ProtocolError(.versionNotSupported, "Only HTTP/1.0 and HTTP/1.1 are supported.")
}
