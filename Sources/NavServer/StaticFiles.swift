import HTTP
import WebClient

/// `GET /`, `GET /client.js`, the inspector's script and style sheet and `GET /openapi.yaml`: files built into the
/// binary, public (they hold no session data), revalidated by `ETag` on every use so a new
/// build is picked up at once.
enum StaticFiles {
    /// The page may load only its own files and talk only to this server: no inline script or
    /// style, no frames, no forms posting elsewhere.
    static let contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
        + "img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    static func response(_ asset: WebAsset, _ request: HTTPRequest) -> HTTPResponse {
        var headers: HTTPHeaders = [
            "ETag": asset.entityTag,
            "Cache-Control": "no-cache",
            "X-Content-Type-Options": "nosniff",
            "Content-Security-Policy": contentSecurityPolicy,
            "Referrer-Policy": "no-referrer",
        ]
        if let condition = request.headers["If-None-Match"], matches(condition, asset.entityTag) {
            return HTTPResponse(status: 304, headers: headers)
        }
        headers.set("Content-Type", asset.contentType)
        return HTTPResponse(status: 200, headers: headers, body: asset.bytes)
    }

    /// `If-None-Match`: `*` or a list of entity tags, compared weakly (RFC 9110, 13.1.2).
    static func matches(_ condition: String, _ tag: String) -> Bool {
        condition.split(separator: ",").contains { candidate in
            var candidate = candidate.drop { $0 == " " || $0 == "\t" }
            while let last = candidate.last, last == " " || last == "\t" { candidate = candidate.dropLast() }
            if candidate == "*" { return true }
            if candidate.hasPrefix("W/") { candidate = candidate.dropFirst(2) }
            return candidate == tag
        }
    }
}
