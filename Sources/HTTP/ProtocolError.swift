/// A request the server refuses on its own, before or instead of the handler. The
/// connection is always closed after the error response.
struct ProtocolError: Error, Sendable, Equatable {
    let status: Int
    let code: String
    let message: String

    var response: HTTPResponse {
        HTTPResponse.error(status: status, code: code, message: message)
    }

    static func badRequest(_ message: String) -> ProtocolError {
        ProtocolError(status: 400, code: "bad_request", message: message)
    }

    static let requestTimeout = ProtocolError(
        status: 408, code: "request_timeout", message: "The request did not arrive in time.")
    static let uriTooLong = ProtocolError(
        status: 414, code: "uri_too_long", message: "The request line is too long.")
    static let headersTooLarge = ProtocolError(
        status: 431, code: "headers_too_large", message: "The request header section is too large.")
    static let payloadTooLarge = ProtocolError(
        status: 413, code: "payload_too_large", message: "The request body is too large.")
    static let overCapacity = ProtocolError(
        status: 503, code: "over_capacity", message: "The server has too many open connections.")
    static let versionNotSupported = ProtocolError(
        status: 505, code: "http_version_not_supported", message: "Only HTTP/1.0 and HTTP/1.1 are supported.")

    static func notImplemented(_ message: String) -> ProtocolError {
        ProtocolError(status: 501, code: "not_implemented", message: message)
    }
}
