import HTTP
import WebClient

/// The API's routes, matched on path segments.
enum Route: String, Sendable, CaseIterable {
    case healthz, readyz, metrics, features, asset
    case sessions, session, navigation, state, actions, binding, dismiss, pop, push, events, streamTickets

    /// The methods each route answers; `HEAD` goes with every `GET`.
    var methods: [String] {
        switch self {
        case .healthz, .readyz, .metrics, .features, .asset, .navigation, .events: ["GET", "HEAD"]
        case .sessions, .actions, .dismiss, .pop, .push, .streamTickets: ["POST"]
        case .session: ["GET", "HEAD", "DELETE"]
        case .state, .binding: ["PUT"]
        }
    }

    /// A route on one session: its first path parameter is the session's id.
    var isSessionRoute: Bool {
        switch self {
        case .healthz, .readyz, .metrics, .features, .asset, .sessions: false
        case .session, .navigation, .state, .actions, .binding, .dismiss, .pop, .push, .events, .streamTickets: true
        }
    }

    /// The route and its path parameters (session id, then the feature, presentation or stack id,
    /// then the binding name), or `nil` for a path the API does not have. `encodedPath` is the
    /// path as sent: it is split on its slashes first and each segment decoded after, so an id
    /// holding an encoded slash stays one segment.
    static func match(_ encodedPath: Substring) -> (route: Route, parameters: [String])? {
        var path = encodedPath
        return path.withUTF8 { bytes in
            // The segments are found and compared on the path's bytes, without an array of
            // slices: only the parameters become strings of their own.
            withUnsafeTemporaryAllocation(of: Int.self, capacity: maxSegments + 1) { slashes in
                var count = 0
                var escaped = false
                for index in bytes.indices {
                    if bytes[index] == UInt8(ascii: "%") { escaped = true }
                    guard bytes[index] == UInt8(ascii: "/") else { continue }
                    guard count <= maxSegments else { return nil }
                    slashes[count] = index
                    count += 1
                }
                // What comes before the first slash is not a segment.
                var segments = PathSegments(bytes: bytes, slashes: UnsafeBufferPointer(rebasing: slashes[0..<count]))
                if escaped {
                    guard let decoded = segments.decodedEach() else { return nil }
                    segments.decoded = decoded
                }
                return match(segments)
            }
        }
    }

    /// No route has more segments.
    private static let maxSegments = 6

    private static func match(_ segments: PathSegments) -> (route: Route, parameters: [String])? {
        switch segments.count {
        case 1:
            if segments.is(0, "healthz") { return (.healthz, []) }
            if segments.is(0, "readyz") { return (.readyz, []) }
            if segments.is(0, "metrics") { return (.metrics, []) }
            if segments.is(0, "features") { return (.features, []) }
            if segments.is(0, "sessions") { return (.sessions, []) }
            // The inspector page, the JavaScript client, the page's files and the OpenAPI document.
            let asset = "/" + segments.string(0)
            return WebAsset.all[asset] != nil ? (.asset, [asset]) : nil
        case 2 where segments.is(0, "sessions") && !segments.isEmpty(1):
            return (.session, [segments.string(1)])
        case 3 where segments.is(0, "sessions") && !segments.isEmpty(1):
            if segments.is(2, "navigation") { return (.navigation, [segments.string(1)]) }
            if segments.is(2, "state") { return (.state, [segments.string(1)]) }
            if segments.is(2, "actions") { return (.actions, [segments.string(1)]) }
            if segments.is(2, "events") { return (.events, [segments.string(1)]) }
            if segments.is(2, "stream-tickets") { return (.streamTickets, [segments.string(1)]) }
            return nil
        case 5 where segments.is(0, "sessions") && !segments.isEmpty(1) && !segments.isEmpty(3):
            if segments.is(2, "presentations") && segments.is(4, "dismiss") { return (.dismiss, [segments.string(1), segments.string(3)]) }
            if segments.is(2, "stacks") && segments.is(4, "pop") { return (.pop, [segments.string(1), segments.string(3)]) }
            if segments.is(2, "features") && segments.is(4, "push") { return (.push, [segments.string(1), segments.string(3)]) }
            return nil
        case 6 where segments.is(0, "sessions") && segments.is(2, "features") && segments.is(4, "bindings")
            && !segments.isEmpty(1) && !segments.isEmpty(3) && !segments.isEmpty(5):
            return (.binding, [segments.string(1), segments.string(3), segments.string(5)])
        default:
            return nil
        }
    }
}

/// A path's segments as byte ranges: the bytes after each slash, up to the next one. A path
/// with percent-escapes also carries each segment decoded, and is compared on those.
private struct PathSegments {
    let bytes: UnsafeBufferPointer<UInt8>
    let slashes: UnsafeBufferPointer<Int>
    var decoded: [String]? = nil

    var count: Int { slashes.count }

    subscript(index: Int) -> UnsafeBufferPointer<UInt8> {
        let end = index + 1 < slashes.count ? slashes[index + 1] : bytes.count
        return UnsafeBufferPointer(rebasing: bytes[(slashes[index] + 1)..<end])
    }

    func isEmpty(_ index: Int) -> Bool {
        decoded.map { $0[index].isEmpty } ?? self[index].isEmpty
    }

    func `is`(_ index: Int, _ name: String) -> Bool {
        decoded.map { $0[index] == name } ?? self[index].elementsEqual(name.utf8)
    }

    func string(_ index: Int) -> String {
        decoded?[index] ?? String(decoding: self[index], as: UTF8.self)
    }

    /// Every segment percent-decoded; nil when one does not decode.
    func decodedEach() -> [String]? {
        var result: [String] = []
        result.reserveCapacity(count)
        for index in 0..<count {
            guard let segment = HTTPRequest.decodePathSegment(self[index]) else { return nil }
            result.append(segment)
        }
        return result
    }
}
