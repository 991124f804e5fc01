import HTTP
import NavigationCore

/// A refused request, as API.md's error body: `{"error":{"code","message"}}`.
struct APIError: Error {
    let status: Int
    let code: String
    let message: String
    var headers: HTTPHeaders = [:]
    /// What the request's log line adds: what the client sent that the refusal is about (the
    /// host name a 421 refused), so an operator can tell from the log what to allow.
    var logged: [(name: String, value: String)] = []

    /// Messages quote what the client sent (an unknown action's name, a path); a quote that long
    /// is cut, so an answer is never as large as the request that earned it. Counted in Unicode
    /// scalars, since one character may hold any number of them (combining marks).
    static let maxMessageScalars = 1024

    init(_ status: Int, _ code: String, _ message: String, headers: HTTPHeaders = [:]) {
        self.status = status
        self.code = code
        self.message = Self.cut(message, atMost: Self.maxMessageScalars)
        self.headers = headers
    }

    /// `text`, or its first `limit` Unicode scalars and an ellipsis when it has more.
    static func cut(_ text: String, atMost limit: Int) -> String {
        let scalars = text.unicodeScalars
        return scalars.count <= limit ? text : String(String.UnicodeScalarView(scalars.prefix(limit))) + "…"
    }

    init(_ error: NavigationError) {
        switch error.kind {
        case .conflict: self.init(409, error.code, error.message)
        case .invalid: self.init(422, error.code, error.message)
        case .preconditionFailed: self.init(412, error.code, error.message)
        case .gone: self.init(404, error.code, error.message)
        case .unavailable: self.init(503, error.code, error.message, headers: ["Retry-After": "1"])
        }
    }

    /// What the HTTP layer refuses on its own, in the API's codes.
    init(_ error: ProtocolError) {
        let code = switch error.kind {
        case .badRequest: "bad_request"
        case .notImplemented: "not_implemented"
        case .versionNotSupported: "http_version_not_supported"
        case .uriTooLong: "uri_too_long"
        case .headersTooLarge: "headers_too_large"
        case .payloadTooLarge: "payload_too_large"
        case .requestTimeout: "request_timeout"
        case .overCapacity: "over_capacity"
        case .shuttingDown: "shutting_down"
        case .internalError: "internal_error"
        }
        let headers: HTTPHeaders = switch error.kind {
        case .overCapacity: ["Retry-After": "1"]
        case .shuttingDown: APIError.shuttingDown.headers
        default: [:]
        }
        self.init(error.status, code, error.message, headers: headers)
    }

    /// `{"error":{"code":"...","message":"..."}}`, as JSON.
    var response: HTTPResponse {
        var body: [UInt8] = []
        body.reserveCapacity(32 + code.utf8.count + message.utf8.count)
        body.append(contentsOf: #"{"error":{"code":"#.utf8)
        JSONWriter.writeString(code, into: &body)
        body.append(contentsOf: #","message":"#.utf8)
        JSONWriter.writeString(message, into: &body)
        body.append(contentsOf: "}}".utf8)
        return .json(status: status, body, headers: headers)
    }

    static func invalidBody(_ path: String, _ reason: String) -> APIError {
        APIError(422, "invalid_request", "\(path): \(reason)")
    }

    static let unauthorized = APIError(401, "unauthorized", "a valid bearer token for this session is required",
                                       headers: ["WWW-Authenticate": "Bearer"])
    static let invalidTicket = APIError(401, "unauthorized", "the stream ticket is unknown, used or expired; ask POST /sessions/{id}/stream-tickets for a new one",
                                        headers: ["WWW-Authenticate": "Bearer"])
    static func overCapacity(sessions limit: Int) -> APIError {
        APIError(503, "over_capacity", "the server hosts its maximum of \(limit) sessions", headers: ["Retry-After": "1"])
    }

    static func overCapacity(memory limit: Int) -> APIError {
        APIError(503, "over_capacity", "the server's sessions hold all the memory they may (\(limit) bytes)", headers: ["Retry-After": "1"])
    }

    static func unknownSession(_ id: String) -> APIError { APIError(404, "session_not_found", "no session \(id)") }
    /// 503 as for any failed write, but not "nothing changed": the store lost its connection
    /// while committing the change and could not say whether it did.
    static let commitUnsettled = APIError(503, "storage_unavailable", "the store's connection was lost while it committed "
        + "this change, which may or may not be stored: read the session before sending it again", headers: ["Retry-After": "1"])
    static let shuttingDown = APIError(503, "shutting_down", "the server is shutting down", headers: ["Retry-After": "5"])
}
