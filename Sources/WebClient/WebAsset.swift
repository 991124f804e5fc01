/// A file the server hands out as it is: the JavaScript client module, the inspector page with
/// its script and style sheet, and the API's OpenAPI document.
///
/// The files live in `Resources/` as ordinary files (the JavaScript module is usable without
/// navd) and SwiftPM embeds them into the binary at build time (`.embedInCode`), so the server
/// needs no bundle, no file system and no build step of its own to serve them.
/// `Resources/openapi.yaml` is a symbolic link to the repository's `openapi.yaml`, so the served
/// document is the committed one, never a copy that could drift; a server regenerates only its
/// marked region from the features it hosts (the demo features' is what is committed).
public struct WebAsset: Sendable {
    /// The URL path it is served at.
    public let path: String
    public let contentType: String
    public let bytes: [UInt8]
    /// A strong validator for `ETag`/`If-None-Match`: a hash of the bytes, quoted.
    public let entityTag: String

    /// A file served at `path`; a server that makes a file of its own (its OpenAPI document,
    /// with its features' schemas) serves it like the built-in ones.
    public init(path: String, contentType: String, bytes: [UInt8]) {
        self.path = path
        self.contentType = contentType
        self.bytes = bytes
        self.entityTag = "\"" + Self.fingerprint(bytes) + "\""
    }

    /// Every asset, by path.
    public static let all: [String: WebAsset] = {
        let assets = [
            WebAsset(path: "/", contentType: "text/html; charset=utf-8", bytes: PackageResources.index_html),
            WebAsset(path: "/client.js", contentType: "text/javascript; charset=utf-8", bytes: PackageResources.navd_client_js),
            WebAsset(path: "/inspector.js", contentType: "text/javascript; charset=utf-8", bytes: PackageResources.inspector_js),
            WebAsset(path: "/inspector.css", contentType: "text/css; charset=utf-8", bytes: PackageResources.inspector_css),
            // RFC 9512's media type for YAML.
            WebAsset(path: "/openapi.yaml", contentType: "application/yaml; charset=utf-8", bytes: PackageResources.openapi_yaml),
        ]
        return Dictionary(uniqueKeysWithValues: assets.map { ($0.path, $0) })
    }()

    /// 64-bit FNV-1a, hex: enough to tell two builds' files apart; not a security measure.
    static func fingerprint(_ bytes: [UInt8]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x100_0000_01b3
        }
        let text = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - text.count) + text
    }
}
