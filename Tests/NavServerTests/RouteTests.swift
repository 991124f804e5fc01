@testable import NavServer
import Testing

/// Paths to routes, matched on the path's bytes: every route with its parameters, and the
/// near misses that must match nothing.
@Suite struct RouteTests {
    @Test func everyRouteMatchesWithItsParameters() throws {
        let cases: [(String, Route, [String])] = [
            ("/healthz", .healthz, []), ("/readyz", .readyz, []), ("/metrics", .metrics, []),
            ("/features", .features, []), ("/sessions", .sessions, []),
            ("/openapi.yaml", .asset, ["/openapi.yaml"]),
            ("/sessions/s1", .session, ["s1"]),
            ("/sessions/s1/navigation", .navigation, ["s1"]), ("/sessions/s1/state", .state, ["s1"]),
            ("/sessions/s1/actions", .actions, ["s1"]), ("/sessions/s1/events", .events, ["s1"]),
            ("/sessions/s1/stream-tickets", .streamTickets, ["s1"]),
            ("/sessions/s1/presentations/p2/dismiss", .dismiss, ["s1", "p2"]),
            ("/sessions/s1/stacks/s3/pop", .pop, ["s1", "s3"]),
            ("/sessions/s1/features/root/push", .push, ["s1", "root"]),
            ("/sessions/s1/features/p4/bindings/text", .binding, ["s1", "p4", "text"]),
            ("/sessions/ünï/actions", .actions, ["ünï"]),
            // Split first, decoded after: an encoded slash stays inside its segment.
            ("/sessions/s1%2Fnavigation", .session, ["s1/navigation"]),
            ("/sessions/a%2Fb/navigation", .navigation, ["a/b"]),
            ("/sessions/s1/features/p%2F4/bindings/t%2Fx", .binding, ["s1", "p/4", "t/x"]),
            ("/%73essions/s%31/actions", .actions, ["s1"]),
            ("/sessions/%C3%BCn%C3%AF/actions", .actions, ["ünï"]),
            ("/sessions/%2Factions", .session, ["/actions"]),
        ]
        for (path, route, parameters) in cases {
            let matched = try #require(Route.match(path[...]), "\(path)")
            #expect(matched.route == route, "\(path)")
            #expect(matched.parameters == parameters, "\(path)")
        }
    }

    @Test func nearMissesMatchNothing() {
        for path in ["", "healthz", "/healthz/", "/Healthz", "/healthzz", "/nope", "/sessions/", "/sessions//actions",
                     "/sessions/s1/action", "/sessions/s1/actions/", "/sessions/s1/presentations//dismiss",
                     "/sessions/s1/stacks/s3/push", "/sessions/s1/features/p4/bindings/", "/sessions/s1/features/p4/binding/text",
                     "/sessions/s1/features/p4/bindings/text/more", "/a/b/c/d/e/f/g/h", "//",
                     // Escapes that do not decode, or decode to nothing a route has.
                     "/sessions/%FF/state", "/sessions/%2/state", "/sessions/s1/%61ction", "/healthz%2F"] {
            #expect(Route.match(path[...]) == nil, "\(path)")
        }
    }
}
