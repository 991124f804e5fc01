/// A code of API.md's error body (`{"error":{"code",...}}`); `other` keeps codes this client
/// does not know yet.
public enum NavdErrorCode: Sendable, Hashable {
    /// Malformed HTTP, JSON, body, `If-Match` or query (400).
    case badRequest, malformedJSON, missingBody, badIfMatch, badQuery
    /// A missing or wrong token or ticket (401).
    case unauthorized
    /// No such session (it ended), or no such endpoint (404).
    case sessionNotFound, notFound
    /// A method the path does not answer (405), or a request that arrived too slowly (408).
    case methodNotAllowed, requestTimeout
    /// The named presentation, feature, stack or element is no longer on screen (409).
    case notPresented, notOnScreen
    /// `If-Match` named another version (412).
    case versionMismatch
    /// The request named a host the server does not answer for (421, `--allowed-hosts`).
    case misdirectedRequest
    /// A request past a size limit, or a body that is not JSON (413, 414, 415, 431).
    case payloadTooLarge, uriTooLong, unsupportedMediaType, headersTooLarge
    /// Well-formed JSON the feature does not have: a field, feature, action, binding or button (422).
    case invalidRequest, unknownFeature, unknownAction, unknownBinding, readOnlyBinding, unknownButton
    /// An argument, state, pop or push value that does not fit, or is too large (422).
    case invalidArgument, invalidState, invalidPop, notAccepted, stateTooLarge
    /// The server cannot take the request now; retry later (503).
    case overCapacity, shuttingDown, storageUnavailable, sessionEnding, notReady
    /// A server fault (500).
    case internalError
    /// A code this client does not know yet, as sent.
    case other(String)

    private static let known: [String: NavdErrorCode] = [
        "bad_request": .badRequest, "malformed_json": .malformedJSON, "missing_body": .missingBody,
        "bad_if_match": .badIfMatch, "bad_query": .badQuery, "unauthorized": .unauthorized,
        "session_not_found": .sessionNotFound, "not_found": .notFound, "method_not_allowed": .methodNotAllowed,
        "request_timeout": .requestTimeout, "not_presented": .notPresented, "not_on_screen": .notOnScreen,
        "version_mismatch": .versionMismatch, "misdirected_request": .misdirectedRequest, "payload_too_large": .payloadTooLarge, "uri_too_long": .uriTooLong,
        "unsupported_media_type": .unsupportedMediaType, "headers_too_large": .headersTooLarge,
        "invalid_request": .invalidRequest, "unknown_feature": .unknownFeature, "unknown_action": .unknownAction,
        "unknown_binding": .unknownBinding, "read_only_binding": .readOnlyBinding, "unknown_button": .unknownButton,
        "invalid_argument": .invalidArgument, "invalid_state": .invalidState, "invalid_pop": .invalidPop,
        "not_accepted": .notAccepted, "state_too_large": .stateTooLarge, "over_capacity": .overCapacity,
        "shutting_down": .shuttingDown, "storage_unavailable": .storageUnavailable,
        "session_ending": .sessionEnding, "not_ready": .notReady,
        "internal_error": .internalError,
    ]

    /// The case for a code as the server spells it (`session_not_found`).
    public init(_ code: String) { self = Self.known[code] ?? .other(code) }
}

/// What the client could not do: navd's error answer, or a transport or decoding failure.
public enum NavdError: Error, Sendable, CustomStringConvertible {
    /// navd answered `status` with an error body.
    case server(status: Int, code: NavdErrorCode, message: String)
    /// The request did not reach navd, or its answer did not arrive.
    case transport(String)
    /// The answer was not what API.md promises.
    case invalidResponse(String)

    /// navd's error answer from its status and body (`{"error":{"code","message"}}`); a body
    /// that is not one gives `http_error` and `message`.
    static func server(status: Int, body: JSONValue, message: @autoclosure () -> String) -> NavdError {
        .server(status: status, code: NavdErrorCode(body["error"]?["code"]?.stringValue ?? "http_error"),
                message: body["error"]?["message"]?.stringValue ?? message())
    }

    /// The HTTP status of a server error; nil for transport and decoding failures.
    public var status: Int? { if case .server(let status, _, _) = self { status } else { nil } }
    /// The error code of a server error; nil otherwise.
    public var code: NavdErrorCode? { if case .server(_, let code, _) = self { code } else { nil } }

    public var description: String {
        switch self {
        case .server(let status, let code, let message): "\(status) \(code): \(message)"
        case .transport(let message): "transport: \(message)"
        case .invalidResponse(let message): "invalid response: \(message)"
        }
    }
}
