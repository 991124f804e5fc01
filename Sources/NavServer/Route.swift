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
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        switch segments.count {
        case 1:
            switch segments[0] {
            case "healthz": return (.healthz, [])
            case "readyz": return (.readyz, [])
            case "metrics": return (.metrics, [])
            case "features": return (.features, [])
            case "sessions": return (.sessions, [])
            // The inspector page, the JavaScript client, the page's files and the OpenAPI document.
            case _ where WebAsset.all["/" + segments[0]] != nil: return (.asset, ["/" + segments[0]])
            default: return nil
            }
        case 2 where segments[0] == "sessions" && !segments[1].isEmpty:
            return (.session, [segments[1]])
        case 3 where segments[0] == "sessions" && !segments[1].isEmpty:
            switch segments[2] {
            case "navigation": return (.navigation, [segments[1]])
            case "state": return (.state, [segments[1]])
            case "actions": return (.actions, [segments[1]])
            case "events": return (.events, [segments[1]])
            case "stream-tickets": return (.streamTickets, [segments[1]])
            default: return nil
            }
        case 5 where segments[0] == "sessions" && !segments[1].isEmpty && !segments[3].isEmpty:
            switch (segments[2], segments[4]) {
            case ("presentations", "dismiss"): return (.dismiss, [segments[1], segments[3]])
            case ("stacks", "pop"): return (.pop, [segments[1], segments[3]])
            case ("features", "push"): return (.push, [segments[1], segments[3]])
            default: return nil
            }
        case 6 where segments[0] == "sessions" && segments[2] == "features" && segments[4] == "bindings"
            && !segments[1].isEmpty && !segments[3].isEmpty && !segments[5].isEmpty:
            return (.binding, [segments[1], segments[3], segments[5]])
        default:
            return nil
        }
    }
}
