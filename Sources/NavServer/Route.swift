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
        // Slices of the path, compared in place: only the parameters become strings of their own.
        let segments = path.utf8.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst().map(Substring.init)
        let parameter = { (index: Int) in String(segments[index]) }
        switch segments.count {
        case 1:
            switch segments[0] {
            case "healthz": return (.healthz, [])
            case "readyz": return (.readyz, [])
            case "metrics": return (.metrics, [])
            case "features": return (.features, [])
            case "sessions": return (.sessions, [])
            // The inspector page, the JavaScript client, the page's files and the OpenAPI document.
            case _ where WebAsset.all["/" + segments[0]] != nil: return (.asset, ["/" + parameter(0)])
            default: return nil
            }
        case 2 where segments[0] == "sessions" && !segments[1].isEmpty:
            return (.session, [parameter(1)])
        case 3 where segments[0] == "sessions" && !segments[1].isEmpty:
            switch segments[2] {
            case "navigation": return (.navigation, [parameter(1)])
            case "state": return (.state, [parameter(1)])
            case "actions": return (.actions, [parameter(1)])
            case "events": return (.events, [parameter(1)])
            case "stream-tickets": return (.streamTickets, [parameter(1)])
            default: return nil
            }
        case 5 where segments[0] == "sessions" && !segments[1].isEmpty && !segments[3].isEmpty:
            switch (segments[2], segments[4]) {
            case ("presentations", "dismiss"): return (.dismiss, [parameter(1), parameter(3)])
            case ("stacks", "pop"): return (.pop, [parameter(1), parameter(3)])
            case ("features", "push"): return (.push, [parameter(1), parameter(3)])
            default: return nil
            }
        case 6 where segments[0] == "sessions" && segments[2] == "features" && segments[4] == "bindings"
            && !segments[1].isEmpty && !segments[3].isEmpty && !segments[5].isEmpty:
            return (.binding, [parameter(1), parameter(3), parameter(5)])
        default:
            return nil
        }
    }
}
