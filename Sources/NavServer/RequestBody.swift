import HTTP
import NavigationCore

/// Reads a request's JSON body, refusing what is not JSON with API.md's status codes.
enum RequestBody {
    /// `nil` for an empty body. 415 for a body that says it is not JSON, 400 for one that is not.
    static func json(_ request: HTTPRequest) throws(APIError) -> JSON? {
        guard !request.body.isEmpty else { return nil }
        if let type = request.headers["Content-Type"] {
            // The media type before any parameter, without spaces, in lower case: on the bytes.
            let mediaType = type.utf8.prefix { $0 != UInt8(ascii: ";") }
                .compactMap { $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") ? nil : (0x41...0x5A).contains($0) ? $0 | 0x20 : $0 }
            guard mediaType.elementsEqual("application/json".utf8) || mediaType.reversed().starts(with: "+json".utf8.reversed()) else {
                throw APIError(415, "unsupported_media_type", "send the body as application/json, not \(type)")
            }
        }
        do {
            return try JSONParser.parse(request.body)
        } catch {
            throw APIError(400, "malformed_json", error.description)
        }
    }

    /// A body that must be a JSON object with only the given keys.
    static func object(_ request: HTTPRequest, allowed keys: Set<String>, required: Bool = true) throws(APIError) -> JSONObject {
        guard let body = try json(request) else {
            if required { throw APIError(400, "missing_body", "this request needs a JSON body") }
            return JSONObject()
        }
        guard case .object(let object) = body else { throw APIError.invalidBody("body", "expected an object, found \(body.typeName)") }
        for key in object.keys where !keys.contains(key) {
            throw APIError.invalidBody("body.\(key)", "unknown field; expected \(keys.sorted().joined(separator: ", "))")
        }
        return object
    }

    /// A string field the request must have.
    static func string(_ object: JSONObject, _ key: String) throws(APIError) -> String {
        guard let value = try optionalString(object, key) else {
            throw APIError.invalidBody("body.\(key)", "missing; expected a string")
        }
        return value
    }

    static func optionalString(_ object: JSONObject, _ key: String) throws(APIError) -> String? {
        switch object[key] {
        case .string(let value)?: return value
        case nil, .null?: return nil
        case let other?: throw APIError.invalidBody("body.\(key)", "expected a string, found \(other.typeName)")
        }
    }
}
