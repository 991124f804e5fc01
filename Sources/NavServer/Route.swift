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

    /// The route and its path parameters (session id, then the feature, presentation or stack id,
    /// then the binding name), or `nil` for a path the API does not have.
    static func match(_ path: String) -> (route: Route, parameters: [String])? {
        var path = path
        return path.withUTF8 { bytes in
            // The segments are found and compared on the path's bytes, without an array of
            // slices: only the parameters become strings of their own.
            withUnsafeTemporaryAllocation(of: Int.self, capacity: maxSegments + 1) { slashes in
                var count = 0
                for index in bytes.indices where bytes[index] == UInt8(ascii: "/") {
                    guard count <= maxSegments else { return nil }
                    slashes[count] = index
                    count += 1
                }
                // What comes before the first slash is not a segment.
                let segments = PathSegments(bytes: bytes, slashes: UnsafeBufferPointer(rebasing: slashes[0..<count]))
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
        case 2 where segments.is(0, "sessions") && !segments[1].isEmpty:
            return (.session, [segments.string(1)])
        case 3 where segments.is(0, "sessions") && !segments[1].isEmpty:
            if segments.is(2, "navigation") { return (.navigation, [segments.string(1)]) }
            if segments.is(2, "state") { return (.state, [segments.string(1)]) }
            if segments.is(2, "actions") { return (.actions, [segments.string(1)]) }
            if segments.is(2, "events") { return (.events, [segments.string(1)]) }
            if segments.is(2, "stream-tickets") { return (.streamTickets, [segments.string(1)]) }
            return nil
        case 5 where segments.is(0, "sessions") && !segments[1].isEmpty && !segments[3].isEmpty:
            if segments.is(2, "presentations") && segments.is(4, "dismiss") { return (.dismiss, [segments.string(1), segments.string(3)]) }
            if segments.is(2, "stacks") && segments.is(4, "pop") { return (.pop, [segments.string(1), segments.string(3)]) }
            if segments.is(2, "features") && segments.is(4, "push") { return (.push, [segments.string(1), segments.string(3)]) }
            return nil
        case 6 where segments.is(0, "sessions") && segments.is(2, "features") && segments.is(4, "bindings")
            && !segments[1].isEmpty && !segments[3].isEmpty && !segments[5].isEmpty:
            return (.binding, [segments.string(1), segments.string(3), segments.string(5)])
        default:
            return nil
        }
    }
}

/// A path's segments as byte ranges: the bytes after each slash, up to the next one.
private struct PathSegments {
    let bytes: UnsafeBufferPointer<UInt8>
    let slashes: UnsafeBufferPointer<Int>

    var count: Int { slashes.count }

    subscript(index: Int) -> UnsafeBufferPointer<UInt8> {
        let end = index + 1 < slashes.count ? slashes[index + 1] : bytes.count
        return UnsafeBufferPointer(rebasing: bytes[(slashes[index] + 1)..<end])
    }

    func `is`(_ index: Int, _ name: String) -> Bool {
        self[index].elementsEqual(name.utf8)
    }

    func string(_ index: Int) -> String {
        String(decoding: self[index], as: UTF8.self)
    }
}
