import HTTP
import NavigationCore

/// Reads a request's JSON body, refusing what is not JSON with API.md's status codes.
enum RequestBody {
    /// `nil` for an empty body. 415 for a body that does not say it is JSON, 400 for one that is
    /// not. Every `Content-Type` a request carries must say JSON: with two that disagree, which
    /// one a proxy in front believed is unknown, so none is taken on trust. One without any is
    /// refused too: it is what a page on another site can send without asking (a `fetch` of a
    /// bare body needs no CORS preflight), and creating sessions needs no token to stop it.
    static func json(_ request: HTTPRequest) throws(APIError) -> JSON? {
        guard !request.body.isEmpty else { return nil }
        var saysJSON = false
        for field in request.headers {
            if ASCII.namesEqual(field.name, "Content-Type") {
                guard isJSON(mediaType: field.value) else {
                    throw APIError(415, "unsupported_media_type", "send the body as application/json, not \(field.value)")
                }
                saysJSON = true
            }
            // A compressed body read as if it were not would be garbage, or worse, JSON that
            // means something else: navd decodes no content coding, and says so (RFC 9110 15.5.16).
            if ASCII.namesEqual(field.name, "Content-Encoding"), !isIdentity(contentCoding: field.value) {
                throw APIError(415, "unsupported_media_type", "send the body without a content coding, not \(field.value)",
                               headers: ["Accept-Encoding": "identity"])
            }
        }
        guard saysJSON else {
            throw APIError(415, "unsupported_media_type", "send the body as application/json, with Content-Type: application/json")
        }
        do {
            return try JSONParser.parse(request.body)
        } catch {
            throw APIError(400, "malformed_json", error.description)
        }
    }

    /// A `Content-Encoding` that names no coding but `identity` (in any case, in a list or alone).
    static func isIdentity(contentCoding header: String) -> Bool {
        header.split(separator: ",", omittingEmptySubsequences: false).allSatisfy { coding in
            let name = coding.trimmingSpaces
            return name.isEmpty || ASCII.namesEqual(String(name), "identity")
        }
    }

    /// `application/json` or any `type/subtype+json`: the media type before any parameter, with
    /// the spaces around it trimmed, in any case, compared on the header's bytes.
    static func isJSON(mediaType header: String) -> Bool {
        let mediaType = header.utf8.prefix { $0 != UInt8(ascii: ";") }
            .drop(while: ASCII.isWhitespace).reversed().drop(while: ASCII.isWhitespace).reversed()
            .lazy.map(ASCII.lowercased)
        if mediaType.elementsEqual("application/json".utf8) { return true }
        // A type, one slash, a subtype ending in `+json`, and nothing but token characters.
        let slash = UInt8(ascii: "/")
        guard let first = mediaType.firstIndex(of: slash), first != mediaType.startIndex,
              first == mediaType.lastIndex(of: slash),
              mediaType.distance(from: first, to: mediaType.endIndex) > "/+json".utf8.count,
              mediaType.reversed().starts(with: "+json".utf8.reversed()) else { return false }
        return mediaType.allSatisfy { $0 == slash || ASCII.isTokenCharacter($0) }
    }

    /// A body that must be a JSON object with only the given keys.
    /// `keys` is a literal of a few names, static and searched in place: a set would be built
    /// and hashed on every request.
    static func object(_ request: HTTPRequest, allowed keys: [String], required: Bool = true) throws(APIError) -> JSONObject {
        guard let body = try json(request) else {
            if required { throw APIError(400, "missing_body", "this request needs a JSON body") }
            return JSONObject()
        }
        guard case .object(let object) = body else { throw APIError.invalidBody("body", "expected an object, found \(body.typeName)") }
        for pair in object.pairs where !keys.contains(pair.key) {
            throw APIError.invalidBody("body.\(pair.key)", "unknown field; expected \(keys.sorted().joined(separator: ", "))")
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
