import CCurl

/// The fact service's base URL, read by libcurl's own URL parser: the host navd compares a
/// redirect with is exactly the host libcurl would connect to, with no second parser to
/// disagree with it.
public struct FactServiceURL: Sendable, Equatable, CustomStringConvertible {
    /// The URL as libcurl normalised it (`http://numbersapi.com/`).
    public let description: String
    /// Lower-cased, as hosts compare.
    public let host: String
    /// `host` or `host:port`, for messages.
    let authority: String

    public static let numbersAPI: FactServiceURL = {
        guard let url = FactServiceURL("http://numbersapi.com") else { preconditionFailure("the default URL parses") }
        return url
    }()

    /// `nil` unless `text` is an absolute http or https URL with a host.
    public init?(_ text: String) {
        guard let parts = Parts(text), ["http", "https"].contains(parts.scheme), let host = parts.host, !host.isEmpty,
              let normalised = parts.part(CURLUPART_URL) else { return nil }
        description = normalised
        self.host = host
        authority = parts.part(CURLUPART_PORT).map { "\(host):\($0)" } ?? host
    }

    /// `GET {url}/{number}`: the number is a path segment after the base's path; the query stays.
    func url(for number: Int) -> String {
        guard let parts = Parts(description) else { return description }
        let path = parts.part(CURLUPART_PATH) ?? "/"
        parts.set(CURLUPART_PATH, path.hasSuffix("/") ? "\(path)\(number)" : "\(path)/\(number)")
        return parts.part(CURLUPART_URL) ?? description
    }

    /// The host `url` names, lower-cased; `nil` if it names none.
    static func host(of url: String) -> String? {
        Parts(url)?.host
    }

    /// One parsed URL in a libcurl URL handle.
    private final class Parts {
        private let handle: OpaquePointer

        init?(_ text: String) {
            guard let handle = curl_url() else { return nil }
            self.handle = handle
            guard curl_url_set(handle, CURLUPART_URL, text, 0) == CURLUE_OK else { return nil }
        }

        deinit { curl_url_cleanup(handle) }

        var scheme: String? { part(CURLUPART_SCHEME)?.lowercased() }
        var host: String? { part(CURLUPART_HOST)?.lowercased() }

        func part(_ part: CURLUPart) -> String? {
            var value: UnsafeMutablePointer<CChar>?
            guard curl_url_get(handle, part, &value, 0) == CURLUE_OK, let value else { return nil }
            defer { curl_free(value) }
            return String(cString: value)
        }

        func set(_ part: CURLUPart, _ value: String) {
            curl_url_set(handle, part, value, 0)
        }
    }
}
