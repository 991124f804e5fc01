/// A code of API.md's error body (`{"error":{"code",...}}`); `other` keeps codes this client
/// does not know yet.
public enum NavdErrorCode: Sendable, Hashable {
    case badRequest, malformedJSON, missingBody, badIfMatch, badQuery
    case unauthorized
    case sessionNotFound, notFound
    case methodNotAllowed, requestTimeout
    case notPresented, notOnScreen
    case versionMismatch
    case payloadTooLarge, uriTooLong, unsupportedMediaType, headersTooLarge
    case invalidRequest, unknownFeature, unknownAction, unknownBinding, readOnlyBinding, unknownButton
    case invalidArgument, invalidState, invalidPop, notAccepted, stateTooLarge
    case overCapacity, shuttingDown, storageUnavailable, notReady
    case internalError
    case other(String)

    private static let known: [String: NavdErrorCode] = [
        "bad_request": .badRequest, "malformed_json": .malformedJSON, "missing_body": .missingBody,
        "bad_if_match": .badIfMatch, "bad_query": .badQuery, "unauthorized": .unauthorized,
        "session_not_found": .sessionNotFound, "not_found": .notFound, "method_not_allowed": .methodNotAllowed,
        "request_timeout": .requestTimeout, "not_presented": .notPresented, "not_on_screen": .notOnScreen,
        "version_mismatch": .versionMismatch, "payload_too_large": .payloadTooLarge, "uri_too_long": .uriTooLong,
        "unsupported_media_type": .unsupportedMediaType, "headers_too_large": .headersTooLarge,
        "invalid_request": .invalidRequest, "unknown_feature": .unknownFeature, "unknown_action": .unknownAction,
        "unknown_binding": .unknownBinding, "read_only_binding": .readOnlyBinding, "unknown_button": .unknownButton,
        "invalid_argument": .invalidArgument, "invalid_state": .invalidState, "invalid_pop": .invalidPop,
        "not_accepted": .notAccepted, "state_too_large": .stateTooLarge, "over_capacity": .overCapacity,
        "shutting_down": .shuttingDown, "storage_unavailable": .storageUnavailable, "not_ready": .notReady,
        "internal_error": .internalError,
    ]

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

    public var status: Int? { if case .server(let status, _, _) = self { status } else { nil } }
    public var code: NavdErrorCode? { if case .server(_, let code, _) = self { code } else { nil } }

    public var description: String {
        switch self {
        case .server(let status, let code, let message): "\(status) \(code): \(message)"
        case .transport(let message): "transport: \(message)"
        case .invalidResponse(let message): "invalid response: \(message)"
        }
    }
}
