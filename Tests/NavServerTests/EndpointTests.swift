import Foundation
@testable import NavServer
import NavigationCore
import SessionStorage
import SQLiteStorage
import Testing
import TestSupport

/// Every endpoint of API.md over a real loopback socket, with its success and its errors.
@Suite(.serialized) struct EndpointTests {
    @Test func healthReadinessAndFeatures() async throws {
        let server = try await TestServer()
        let client = try server.client()
        #expect(try await client.request("GET", "/healthz").json == json(#"{"status":"ok"}"#))
        #expect(try await client.request("GET", "/readyz").status == 200)
        let features = try await client.request("GET", "/features")
        #expect(features.status == 200)
        #expect(features.header("content-type") == "application/json; charset=utf-8")
        let names = features.json["features"]?.arrayValue?.compactMap { $0["name"]?.stringValue } ?? []
        #expect(Set(["app", "counter", "settings", "wifi", "gallery", "connect", "detail"]).isSubset(of: Set(names)))
        let head = try await client.request("HEAD", "/features")
        #expect(head.status == 200 && head.body.isEmpty && head.header("content-length") == String(features.body.count))
        await server.stop()
    }

    /// A session's state can hold what its user typed, and errors repeat what a client sent: no
    /// answer may be kept by a cache unless it says so, and none sniffed as another type (a page).
    /// Static files keep their own rule: revalidated, never stale.
    @Test func noAnswerIsCachedOrSniffedUnlessItSaysSo() async throws {
        let server = try await TestServer()
        let client = try server.client()
        let (id, token) = try await server.session("counter")
        var answers = [
            try await client.request("POST", "/sessions", json: #"{"feature":"counter"}"#),
            try await client.request("GET", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")]),
            try await client.request("POST", "/sessions/\(id)/actions", token: token, json: #"{"target":"root","action":"incrementButtonTapped"}"#),
            try await client.request("GET", "/nope/%3Cscript%3E"),
            try await client.request("GET", "/sessions/\(id)"),
            try await client.request("GET", "/metrics"),
            try await client.request("GET", "/features"),
        ]
        answers.append(try await client.request("HEAD", "/sessions/\(id)/events", headers: [("Authorization", "Bearer \(token)")]))
        for answer in answers {
            #expect(answer.header("x-content-type-options") == "nosniff", "\(answer.status) \(answer.text)")
        }
        for answer in answers.dropLast() {
            #expect(answer.header("cache-control") == "no-store", "\(answer.status) \(answer.text)")
        }
        #expect(answers.last?.header("cache-control") == "no-cache", "an event stream's own")
        let page = try await client.request("GET", "/")
        #expect(page.header("cache-control") == "no-cache" && page.header("x-content-type-options") == "nosniff")
        await server.stop()
    }

    @Test func createReadAndDeleteASession() async throws {
        let server = try await TestServer()
        let client = try server.client()
        let created = try await client.request("POST", "/sessions", json: #"{"feature":"app","state":{"path":[{"settings":{}}]}}"#)
        #expect(created.status == 201)
        let id = try #require(created.json["id"]?.stringValue)
        let token = try #require(created.json["token"]?.stringValue)
        #expect(id.count == 32 && token.count == 64)
        #expect(created.header("location") == "/sessions/\(id)")
        #expect(created.json["version"] == 0)
        #expect(created.json["navigation"]?["stacks"]?[0]?["elements"]?.arrayValue?.count == 1)

        let read = try await client.get("/sessions/\(id)", token: token)
        #expect(read.status == 200)
        #expect(read.json["feature"] == "app" && read.json["id"] == .string(id))
        #expect(read.json["state"] == json(#"{"path":[{"settings":{"isOn":false}}]}"#))
        #expect(read.header("etag") == "\"0\"")
        #expect(try await client.get("/sessions/\(id)/navigation", token: token).json == read.json["navigation"])

        #expect(try await client.request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")]).status == 204)
        #expect(try await client.get("/sessions/\(id)", token: token).status == 404)

        // A `null` state is the defaults, as an absent one is.
        let defaults = try await client.request("POST", "/sessions", json: #"{"feature":"counter","state":null}"#)
        #expect(defaults.status == 201)
        #expect(defaults.json["state"] == json(#"{"count":0,"factIsLoading":false,"destination":null}"#))
        await server.stop()
    }

    /// A session created with a state settles what the state says is under way, as a restart
    /// would: a loading flag nothing runs goes down before the 201, and an alert whose deadline
    /// has passed is dismissed by the server without waiting for a restart.
    @Test func aDeepLinkedSessionSettlesWhatItsStateSaysIsUnderWay() async throws {
        let server = try await TestServer()
        let client = try server.client()
        let counter = try await client.request("POST", "/sessions", json: #"{"feature":"counter","state":{"count":2,"factIsLoading":true}}"#)
        #expect(counter.status == 201)
        #expect(counter.json["state"]?["factIsLoading"] == false)
        #expect(counter.json["state"]?["count"] == 2)

        let gallery = try await client.request("POST", "/sessions", json: #"{"feature":"gallery","state":{"timedAlert":{"id":1,"dismissesAt":1}}}"#)
        #expect(gallery.status == 201)
        let id = try #require(gallery.json["id"]?.stringValue)
        let token = try #require(gallery.json["token"]?.stringValue)
        var dismissed = false
        for _ in 0..<250 where !dismissed {
            let read = try await client.get("/sessions/\(id)", token: token)
            dismissed = read.json["state"]?["timedAlert"] == .null && read.json["navigation"]?["presentations"]?.arrayValue?.isEmpty == true
            if !dismissed { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(dismissed, "the past-due alert is dismissed in the running process")

        // PUT state settles the same way, in its one batch: the raised flag is never shown.
        let counterID = try #require(counter.json["id"]?.stringValue)
        let counterToken = try #require(counter.json["token"]?.stringValue)
        let before = try #require(counter.json["version"]?.intValue)
        let put = try await client.request("PUT", "/sessions/\(counterID)/state", token: counterToken,
                                           json: #"{"state":{"count":9,"factIsLoading":true}}"#)
        #expect(put.status == 200)
        #expect(put.json["version"]?.intValue == before + 1)
        #expect(put.json["events"]?.arrayValue?.map { $0["data"] } == [json(#"{"feature":"root","changes":{"count":9}}"#)])
        let read = try await client.get("/sessions/\(counterID)", token: counterToken)
        #expect(read.json["state"]?["factIsLoading"] == false && read.json["state"]?["count"] == 9)
        // Settled, a state that only raises the flag is what the session has: a no-op.
        let same = try await client.request("PUT", "/sessions/\(counterID)/state", token: counterToken,
                                            json: #"{"state":{"count":9,"factIsLoading":true}}"#)
        #expect(same.status == 200 && same.json["version"]?.intValue == before + 1, "\(same.text)")
        #expect(same.json["events"]?.arrayValue?.isEmpty == true)
        await server.stop()
    }

    /// What a deep link settled is durable with the 201: a restart finds the session as answered.
    @Test func whatADeepLinkSettledSurvivesARestart() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("navd-settle-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let retention = EventRetention(count: 1024, bytes: 1 << 20)
        let store = try SQLiteSessionStore(directory: directory, retention: retention)
        let server = try await TestServer(storage: store)
        let created = try await server.client().request("POST", "/sessions", json: #"{"feature":"counter","state":{"count":4,"factIsLoading":true}}"#)
        #expect(created.status == 201)
        #expect(created.json["state"]?["factIsLoading"] == false)
        let id = try #require(created.json["id"]?.stringValue)
        let token = try #require(created.json["token"]?.stringValue)
        await server.stop()
        store.close()

        let reopened = try SQLiteSessionStore(directory: directory, retention: retention)
        let restarted = try await TestServer(storage: reopened)
        let after = try await restarted.client().get("/sessions/\(id)", token: token)
        #expect(after.json["version"] == created.json["version"])
        #expect(after.json["state"] == created.json["state"])
        await restarted.stop()
        reopened.close()
    }

    /// A restart is not a use, and the time navd was down is no one's idle time: a session
    /// keeps the idle time it had when navd stopped, so it ends a TTL after its last use, not
    /// a TTL after the restart.
    @Test func aRestartIsNotAUseAndDowntimeIsNotIdleTime() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("navd-idle-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let retention = EventRetention(count: 1024, bytes: 1 << 20)
        let ttl = Duration.seconds(8)
        #expect(NavigationServer.reaperRound(ttl: ttl) == .seconds(1))
        func start() async throws -> (TestServer, SQLiteSessionStore) {
            let store = try SQLiteSessionStore(directory: directory, retention: retention)
            return (try await TestServer(storage: store) { $0.idleSessionTTL = ttl }, store)
        }
        func openSessions(_ server: TestServer) async throws -> String? {
            let text = try await server.client().request("GET", "/metrics").text
            return text.split(separator: "\n").first { $0.hasPrefix("navd_sessions_open ") }.map(String.init)
        }

        var (server, store) = try await start()
        let idle = try await server.session("counter")
        let used = try await server.session("counter")
        // Idle for 3 s of the TTL's 8 (and for as long as the stop takes), then a restart after
        // downtime longer than what is left of it.
        try await Task.sleep(for: .seconds(3))
        #expect(try await server.client().get("/sessions/\(used.id)", token: used.token).status == 200)
        await server.stop()
        store.close()
        try await Task.sleep(for: .seconds(5.5))

        (server, store) = try await start()
        let restarted = ContinuousClock.now
        try await Task.sleep(for: .milliseconds(300))
        #expect(try await openSessions(server) == "navd_sessions_open 2", "the downtime did not count")
        var open: String?
        while open != "navd_sessions_open 1" && ContinuousClock.now - restarted < .seconds(9) {
            open = try await openSessions(server)
            try await Task.sleep(for: .milliseconds(50))
        }
        let ended = ContinuousClock.now - restarted
        #expect(open == "navd_sessions_open 1")
        #expect(ended < .seconds(6), "the idle one ended with the idle time it had, not a whole TTL after the restart: \(ended)")
        #expect(try await server.client().get("/sessions/\(idle.id)", token: idle.token).status == 404)
        #expect(try await server.client().get("/sessions/\(used.id)", token: used.token).status == 200)
        await server.stop()
        store.close()
    }

    @Test func createRejectsBadRequests() async throws {
        let server = try await TestServer()
        let client = try server.client()
        let cases: [(String, Int, String)] = [
            (#"{"feature":"chess"}"#, 422, "unknown_feature"),
            (#"{"feature":"app","state":{"path":[{"counter":{}},{"settings":{}},{"counter":{"count":"x"}}]}}"#, 422, "invalid_state"),
            (#"{"state":{}}"#, 422, "invalid_request"),
            (#"{"feature":"app","colour":1}"#, 422, "invalid_request"),
            (#"{"feature":"#, 400, "malformed_json"),
            (#"[1]"#, 422, "invalid_request"),
        ]
        for (body, status, code) in cases {
            let response = try await client.request("POST", "/sessions", json: body)
            #expect(response.status == status, "\(body)")
            #expect(response.json["error"]?["code"] == .string(code), "\(body): \(response.text)")
        }
        let invalid = try await client.request("POST", "/sessions", json: #"{"feature":"app","state":{"path":[{"counter":{}},{"settings":{}},{"counter":{"count":"x"}}]}}"#)
        #expect(invalid.json["error"]?["message"]?.stringValue?.hasPrefix("state.path[2].counter.count") == true)
        let form = try await client.request("POST", "/sessions", headers: [("Content-Type", "text/plain")], body: Array(#"{"feature":"app"}"#.utf8))
        #expect(form.status == 415)
        // A body that does not say what it is, as a page on another site can send without a
        // preflight (`fetch` of a bare Blob): refused, and no session is made.
        let before = try await client.request("GET", "/metrics").text.components(separatedBy: "\n").first { $0.hasPrefix("navd_sessions_open ") }
        let bare = try await client.request("POST", "/sessions", body: Array(#"{"feature":"counter"}"#.utf8))
        #expect(bare.status == 415)
        #expect(bare.json["error"]?["code"] == "unsupported_media_type")
        #expect(bare.json["error"]?["message"]?.stringValue?.contains("Content-Type: application/json") == true, "\(bare.text)")
        let after = try await client.request("GET", "/metrics").text.components(separatedBy: "\n").first { $0.hasPrefix("navd_sessions_open ") }
        #expect(before != nil && before == after, "\(String(describing: before)) then \(String(describing: after))")
        #expect(try await client.request("POST", "/sessions").status == 400)
        // The media type is read without its parameters, the spaces around it, or case; inside
        // it, only `type/subtype` of token characters, `+json` ending the subtype.
        for (type, status) in [("Application/JSON; charset=utf-8", 201), ("application/vnd.navd+json", 201), (" application/json ;q=1", 201),
                               ("application/jsonx", 415), ("text/json", 415), ("+json", 415), ("application/+json", 415),
                               ("application /json", 415), ("application/ json", 415), ("/vnd+json", 415), ("a/b/c+json", 415),
                               ("application/vnd navd+json", 415), ("\tapplication/problem+json\t", 201)] {
            let created = try await client.request("POST", "/sessions", headers: [("Content-Type", type)], body: Array(#"{"feature":"counter"}"#.utf8))
            #expect(created.status == status, "\(type)")
        }
        // Every Content-Type must say JSON: of two that disagree, neither is believed.
        for (types, status) in [(["application/json", "text/plain"], 415), (["text/plain", "application/json"], 415),
                                (["application/json", "application/json; charset=utf-8"], 201)] {
            let created = try await client.request("POST", "/sessions", headers: types.map { ("Content-Type", $0) },
                                                   body: Array(#"{"feature":"counter"}"#.utf8))
            #expect(created.status == status, "\(types)")
        }
        // navd decodes no content coding: a body that has one is refused, not read as JSON.
        for (coding, status) in [("gzip", 415), ("identity, gzip", 415), ("br", 415), ("Identity", 201), (" identity ", 201)] {
            let created = try await client.request("POST", "/sessions", headers: [("Content-Type", "application/json"), ("Content-Encoding", coding)],
                                                   body: Array(#"{"feature":"counter"}"#.utf8))
            #expect(created.status == status, "\(coding): \(created.text)")
            if status == 415 {
                #expect(created.json["error"]?["code"] == "unsupported_media_type")
                #expect(created.header("accept-encoding") == "identity")
            }
        }
        // Strings are checked for UTF-8 whether or not they are ASCII.
        let notUTF8 = try await client.request("POST", "/sessions", headers: [("Content-Type", "application/json")],
                                               body: Array(#"{"feature":""#.utf8) + [0xC3, 0x28] + Array(#""}"#.utf8))
        #expect(notUTF8.json["error"]?["code"] == "malformed_json")
        await server.stop()
    }

    @Test func theBearerSchemeIsReadInAnyCaseAndNothingElseOpensASession() async throws {
        let server = try await TestServer()
        let session = try await server.session("counter")
        let client = try server.client()
        let target = "/sessions/\(session.id)/navigation"
        let (half, rest) = (session.token.prefix(16), session.token.dropFirst(16))
        for (authorization, status) in [("Bearer \(session.token)", 200), ("bearer \(session.token)", 200), ("BEARER  \(session.token)", 200),
                                        ("Bearer \(half) \(rest)", 401), ("Bearer \(half)  \(rest)", 401),
                                        ("Basic \(session.token)", 401), ("Bearer", 401), ("Bearer x\(session.token)", 401),
                                        ("Bearertoken \(session.token)", 401), (session.token, 401)] {
            let response = try await client.request("GET", target, headers: [("Authorization", authorization)])
            #expect(response.status == status, "\(authorization)")
        }
        await server.stop()
    }

    @Test func tokensOpenOnlyTheirOwnSession() async throws {
        let server = try await TestServer()
        let a = try await server.session("counter")
        let b = try await server.session("counter")
        let client = try server.client()
        #expect(try await client.get("/sessions/\(a.id)", token: a.token).status == 200)
        for (target, token) in [("/sessions/\(b.id)", a.token), ("/sessions/\(a.id)", b.token), ("/sessions/\(a.id)", nil), ("/sessions/\(a.id)", "x")] {
            let response = try await client.get(target, token: token)
            #expect(response.status == 401)
            #expect(response.json["error"]?["code"] == "unauthorized")
            #expect(response.header("www-authenticate") == "Bearer")
        }
        #expect(try await client.act(b.id, token: a.token, "incrementButtonTapped").status == 401)
        #expect(try await client.get("/sessions/\(b.id)/events?token=\(a.token)", token: nil).status == 401)
        #expect(try await client.get("/sessions/\(a.id)/navigation?token=\(a.token)", token: nil).status == 401, "?token= opens only the event stream")
        #expect(try await client.get("/sessions/0123456789abcdef0123456789abcdef", token: a.token).status == 404)
        #expect(try await client.get("/sessions/\(b.id)", token: b.token).json["version"] == 0, "b is untouched")
        await server.stop()
    }

    @Test func actionsAnswerVersionAndEvents() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        let response = try await client.act(id, token: token, "incrementButtonTapped")
        #expect(response.status == 200)
        #expect(response.json == json(#"{"version":1,"events":[{"id":1,"event":"state","data":{"feature":"root","changes":{"count":1}}}]}"#))

        let errors: [(String, String, Int, String)] = [
            ("fly", "{}", 422, "unknown_action"),
            ("incrementButtonTapped", #"{"by":2}"#, 422, "invalid_argument"),
        ]
        for (action, args, status, code) in errors {
            let refused = try await client.act(id, token: token, action, args: args)
            #expect(refused.status == status && refused.json["error"]?["code"] == .string(code), "\(refused.text)")
        }
        #expect(try await client.act(id, token: token, "incrementButtonTapped", target: "p99").status == 409)
        #expect(try await client.request("POST", "/sessions/\(id)/actions", token: token, json: #"{"target":"root"}"#).status == 422)
        #expect(try await client.get("/sessions/\(id)", token: token).json["state"]?["count"] == 1, "refusals changed nothing")
        await server.stop()
    }

    @Test func waitTrueReturnsTheEffectsEventsToo() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter", state: #"{"count":7}"#)
        let client = try server.client()
        let response = try await client.act(id, token: token, "factButtonTapped", query: "?wait=true")
        #expect(response.status == 200)
        let kinds = response.json["events"]?.arrayValue?.compactMap { $0["event"]?.stringValue }
        #expect(kinds == ["state", "present", "state"])
        let fact = try #require(presentation("destination.fact", in: await client.get("/sessions/\(id)/navigation", token: token).json))
        #expect(fact["state"] == json(#"{"value":"7 is a stub number."}"#))
        #expect(fact["style"] == "sheet")
        #expect(server.facts.requestedPaths == ["/7"])
        #expect(response.json["effectsPending"] == nil, "every effect ended within the wait")
        await server.stop()
    }

    /// A wait that runs out says so: the effect still runs, and its events come on the stream.
    @Test func waitThatRunsOutSaysTheEffectsArePending() async throws {
        let silent = try FactStub(.silent)
        defer { silent.stop() }
        let server = try await TestServer(demo: { $0.factBaseURL = silent.baseURL; $0.factTimeout = .seconds(30) })
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        let response = try await client.act(id, token: token, "factButtonTapped", query: "?wait=true&timeout=0.3")
        #expect(response.status == 200)
        #expect(response.json["effectsPending"] == true)
        #expect(response.json["events"]?[0]?["data"] == json(#"{"feature":"root","changes":{"factIsLoading":true}}"#))
        await server.stop()
    }

    /// A request waiting for its effects keeps its session in use, however short the idle TTL:
    /// the session is not expired under it (found by an adversarial review).
    @Test func aWaitingRequestKeepsItsSessionInUse() async throws {
        let silent = try FactStub(.silent)
        defer { silent.stop() }
        let server = try await TestServer(configure: { $0.idleSessionTTL = .seconds(1) },
                                          demo: { $0.factBaseURL = silent.baseURL; $0.factTimeout = .seconds(30) })
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        let response = try await client.act(id, token: token, "factButtonTapped", query: "?wait=true&timeout=2.5")
        #expect(response.status == 200)
        #expect(response.json["effectsPending"] == true, "the wait ran its course: \(response.text)")
        #expect(try await client.get("/sessions/\(id)", token: token).status == 200, "not expired during the wait")
        await server.stop()
    }

    @Test func ifMatchGuardsAgainstLostUpdates() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        let ok = try await client.request("POST", "/sessions/\(id)/actions", token: token,
                                    json: #"{"action":"incrementButtonTapped"}"#, headers: [("If-Match", "\"0\"")])
        #expect(ok.status == 200 && ok.header("etag") == "\"1\"")
        let stale = try await client.request("POST", "/sessions/\(id)/actions", token: token,
                                       json: #"{"action":"incrementButtonTapped"}"#, headers: [("If-Match", "\"0\"")])
        #expect(stale.status == 412 && stale.json["error"]?["code"] == "version_mismatch")
        let garbage = try await client.request("POST", "/sessions/\(id)/actions", token: token,
                                         json: #"{"action":"incrementButtonTapped"}"#, headers: [("If-Match", "yesterday")])
        #expect(garbage.status == 400)
        // A version beyond any issued does not match; the answer names the one sent.
        let beyond = try await client.request("POST", "/sessions/\(id)/actions", token: token,
                                        json: #"{"action":"incrementButtonTapped"}"#, headers: [("If-Match", "\"99999999999999999999\"")])
        #expect(beyond.status == 412 && beyond.json["error"]?["code"] == "version_mismatch", "\(beyond.text)")
        #expect(beyond.text.contains("99999999999999999999") && !beyond.text.contains("\(Int.max)"), "\(beyond.text)")
        // Two fields are a list, whichever order they come in: refused, as on one line.
        for pair in [("\"1\"", "\"9\""), ("\"9\"", "\"1\"")] {
            let twice = try await client.request("POST", "/sessions/\(id)/actions", token: token,
                                                 json: #"{"action":"incrementButtonTapped"}"#, headers: [("If-Match", pair.0), ("If-Match", pair.1)])
            #expect(twice.status == 400 && twice.json["error"]?["code"] == "bad_if_match", "\(twice.text)")
        }
        // Tags compare as strings: "01" is not version 1's.
        let padded = try await client.request("POST", "/sessions/\(id)/actions", token: token,
                                        json: #"{"action":"incrementButtonTapped"}"#, headers: [("If-Match", "\"01\"")])
        #expect(padded.status == 412 && padded.json["error"]?["code"] == "version_mismatch", "\(padded.text)")
        // A repeated wait or timeout is refused, not decided by whichever came first.
        for query in ["?wait=true&wait=maybe", "?wait=true&timeout=5&timeout=abc"] {
            let repeated = try await client.act(id, token: token, "incrementButtonTapped", query: query)
            #expect(repeated.status == 400 && repeated.json["error"]?["code"] == "bad_query", "\(query): \(repeated.text)")
        }
        #expect(try await client.get("/sessions/\(id)", token: token).json["version"] == 1)
        // So is every other parameter navd reads, on the stream too: the first copy never wins.
        let ticket = try #require(try await client.request("POST", "/sessions/\(id)/stream-tickets",
                                                          headers: [("Authorization", "Bearer \(token)")]).json["ticket"]?.stringValue)
        for query in ["?token=\(token)&token=wrong", "?ticket=\(ticket)&ticket=\(ticket)", "?token=\(token)&lastEventId=0&lastEventId=5"] {
            let repeated = try await client.get("/sessions/\(id)/events\(query)", token: nil)
            #expect(repeated.status == 400 && repeated.json["error"]?["code"] == "bad_query", "\(query): \(repeated.text)")
        }
        let unused = try await client.request("HEAD", "/sessions/\(id)/events?ticket=\(ticket)")
        #expect(unused.status == 200, "the refused requests left the ticket unused")
        // DELETE is conditional too: a stale version leaves the session, the current one ends it.
        let staleDelete = try await client.request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)"), ("If-Match", "\"0\"")])
        #expect(staleDelete.status == 412 && staleDelete.json["error"]?["code"] == "version_mismatch")
        #expect(try await client.get("/sessions/\(id)", token: token).status == 200)
        #expect(try await client.request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)"), ("If-Match", "yesterday")]).status == 400)
        #expect(try await client.request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)"), ("If-Match", "\"1\"")]).status == 204)
        #expect(try await client.get("/sessions/\(id)", token: token).status == 404)
        await server.stop()
    }

    @Test func bindingsDismissalsPopsAndPushes() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("app", state: #"{"path":[{"counter":{"destination":{"settings":{}}}},{"counter":{"destination":{"fact":{"value":"x"}}}}]}"#)
        let client = try server.client()
        var tree = try await client.get("/sessions/\(id)/navigation", token: token).json
        let stack = try #require(tree["stacks"]?[0]?["id"]?.stringValue)
        let elements = tree["stacks"]?[0]?["elements"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        let settings = try #require(presentation("destination.settings", in: tree)?["id"]?.stringValue)
        let fact = try #require(presentation("destination.fact", in: tree)?["id"]?.stringValue)

        let bound = try await client.request("PUT", "/sessions/\(id)/features/\(settings)/bindings/isOn", token: token, json: "true")
        #expect(bound.json["events"]?[0]?["data"] == json(#"{"feature":"\#(settings)","changes":{"isOn":true}}"#))
        #expect(try await client.request("PUT", "/sessions/\(id)/features/\(settings)/bindings/isOn", token: token, json: #""yes""#).status == 422)
        #expect(try await client.request("PUT", "/sessions/\(id)/features/\(settings)/bindings/nope", token: token, json: "1").status == 422)
        #expect(try await client.request("PUT", "/sessions/\(id)/features/p404/bindings/isOn", token: token, json: "true").status == 409)

        let dismissed = try await client.request("POST", "/sessions/\(id)/presentations/\(fact)/dismiss", token: token, json: "")
        #expect(dismissed.status == 200)
        #expect(dismissed.json["events"]?[0]?["data"] == json(#"{"id":"\#(fact)","origin":"client"}"#))
        let again = try await client.request("POST", "/sessions/\(id)/presentations/\(fact)/dismiss", token: token, json: "{}")
        #expect(again.status == 409 && again.json["error"]?["code"] == "not_presented")

        let pushed = try await client.request("POST", "/sessions/\(id)/features/\(settings)/push", token: token, json: #"{"value":{"settings":{}}}"#)
        #expect(pushed.json["events"]?[0]?["event"] == "push")
        let rejected = try await client.request("POST", "/sessions/\(id)/features/root/push", token: token, json: #"{"value":{"wifi":{}}}"#)
        #expect(rejected.status == 422 && rejected.json["error"]?["code"] == "not_accepted")

        let popped = try await client.request("POST", "/sessions/\(id)/stacks/\(stack)/pop", token: token, json: #"{"to":"\#(elements[0])"}"#)
        let popEvent = popped.json["events"]?.arrayValue?.first { $0["event"] == "pop" }
        #expect(popEvent?["data"]?["ids"]?.arrayValue?.count == 2)
        #expect(popEvent?["data"]?["origin"] == "client")
        #expect(try await client.request("POST", "/sessions/\(id)/stacks/\(stack)/pop", token: token, json: #"{"count":5}"#).status == 422)
        #expect(try await client.request("POST", "/sessions/\(id)/stacks/\(stack)/pop", token: token, json: #"{"count":1,"to":"e1"}"#).status == 422)
        #expect(try await client.request("POST", "/sessions/\(id)/stacks/s999/pop", token: token, json: #"{"count":1}"#).status == 409)
        #expect(try await client.request("POST", "/sessions/\(id)/stacks/\(stack)/pop", token: token, json: #"{"count":1}"#).status == 200)

        let replaced = try await client.request("PUT", "/sessions/\(id)/state", token: token, json: #"{"state":{"path":[{"settings":{"isOn":true}}]}}"#)
        #expect(replaced.json["events"]?.arrayValue?.compactMap { $0["event"]?.stringValue } == ["push"])
        #expect(try await client.request("PUT", "/sessions/\(id)/state", token: token, json: #"{"state":{"path":3}}"#).status == 422)
        tree = try await client.get("/sessions/\(id)/navigation", token: token).json
        #expect(tree["stacks"]?[0]?["elements"]?[0]?["state"] == json(#"{"isOn":true}"#))
        await server.stop()
    }

    @Test func alertButtonsOverHTTP() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("wifi", state: #"{"selectedNetworkID":"n2","destination":{"detail":{"network":{"id":"n2","name":"Blob Café","isSecured":false,"connectivity":0.75},"forgetAlertIsPresented":true}}}"#)
        let client = try server.client()
        let tree = try await client.get("/sessions/\(id)/navigation", token: token).json
        let alert = try #require(presentation("forgetAlertIsPresented", in: tree))
        #expect(alert["alert"]?["buttons"] == json(#"[{"id":"cancel","label":"Cancel","role":"cancel"},{"id":"forget","label":"Forget","role":"destructive"}]"#))
        let unknown = try await client.request("POST", "/sessions/\(id)/presentations/\(alert["id"]?.stringValue ?? "")/dismiss", token: token, json: #"{"button":"maybe"}"#)
        #expect(unknown.status == 422)
        let forgot = try await client.request("POST", "/sessions/\(id)/presentations/\(alert["id"]?.stringValue ?? "")/dismiss", token: token, json: #"{"button":"forget"}"#)
        #expect(forgot.json["events"]?.arrayValue?.compactMap { $0["event"]?.stringValue } == ["dismiss", "dismiss", "state"])
        #expect(try await client.get("/sessions/\(id)", token: token).json["state"]?["selectedNetworkID"] == .null)
        await server.stop()
    }

    @Test func unknownPathsAndMethods() async throws {
        let server = try await TestServer()
        let client = try server.client()
        let missing = try await client.request("GET", "/nope")
        #expect(missing.status == 404 && missing.json["error"]?["code"] == "not_found")
        let wrongMethod = try await client.request("DELETE", "/features")
        #expect(wrongMethod.status == 405)
        #expect(wrongMethod.header("allow") == "GET, HEAD, OPTIONS")
        let put = try await client.request("PUT", "/sessions", json: "{}")
        #expect(put.status == 405 && put.header("allow") == "POST, OPTIONS")
        await server.stop()
    }

    @Test func corsPreflightAndHeaders() async throws {
        let server = try await TestServer { $0.cors.origins = .only(["https://app.example"]) }
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        let preflight = try await client.request("OPTIONS", "/sessions/\(id)/actions", headers: [
            ("Origin", "https://app.example"), ("Access-Control-Request-Method", "POST"),
            ("Access-Control-Request-Headers", "authorization, content-type"),
        ])
        #expect(preflight.status == 204)
        #expect(preflight.header("access-control-allow-origin") == "https://app.example")
        #expect(preflight.header("access-control-allow-methods")?.contains("POST") == true)
        #expect(preflight.header("access-control-allow-headers")?.contains("Authorization") == true)
        let acted = try await client.request("POST", "/sessions/\(id)/actions", token: token,
                                             json: #"{"action":"incrementButtonTapped"}"#, headers: [("Origin", "https://app.example")])
        #expect(acted.status == 200)
        #expect(acted.header("access-control-allow-origin") == "https://app.example")
        let stream = try server.client()
        try await stream.send(LoopbackClient.format("GET", "/sessions/\(id)/events?token=\(token)", headers: [("Origin", "https://app.example")]))
        let head = try await stream.readResponse()
        #expect(head.status == 200)
        #expect(head.header("access-control-allow-origin") == "https://app.example")
        await server.stop()
    }

    @Test func metricsExposeTrafficSessionsStreamsEventsAndFacts() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        _ = try await client.act(id, token: token, "incrementButtonTapped")
        _ = try await client.act(id, token: token, "factButtonTapped", query: "?wait=true")
        let stream = try server.client()
        try await stream.send(LoopbackClient.format("GET", "/sessions/\(id)/events?token=\(token)"))
        _ = try await stream.readResponse()
        _ = try await stream.readEvents { $0.name == "snapshot" }
        let metrics = try await client.request("GET", "/metrics")
        #expect(metrics.header("content-type")?.hasPrefix("text/plain; version=0.0.4") == true)
        let text = metrics.text
        for line in [
            #"navd_http_requests_total{route="actions",method="POST",code="200"} 2"#,
            #"navd_http_requests_total{route="sessions",method="POST",code="201"} 1"#,
            "navd_sessions_open 1",
            "navd_event_streams_open 1",
            #"navd_events_emitted_total{type="present"} 1"#,
            #"navd_fact_fetches_total{outcome="success"} 1"#,
            "navd_event_stream_subscribers_dropped_total 0",
            "# TYPE navd_http_request_duration_seconds histogram",
            #"navd_http_request_duration_seconds_count{route="actions",method="POST",code="200"} 1"#,
            #"navd_http_wait_request_duration_seconds_count{route="actions",method="POST",code="200"} 1"#,
        ] {
            #expect(text.contains(line), "missing: \(line)")
        }
        await server.stop()
    }
}
