import Foundation
@testable import NavServer
import NavigationCore
import SessionStorage
import Synchronization
import Testing
import TestSupport

/// Two servers on one PostgreSQL database, both asked for one session: each request to the node
/// that does not hold it claims it, and only the owner of the moment ever commits. A node that
/// was taken over answers 404 for the request it could not write, writes nothing, and closes the
/// session's streams without `end`; its next request claims the session back.
@Suite(.serialized, .enabled(if: PostgresServer.isAvailable, "no PostgreSQL server could be started here (initdb/pg_ctl missing, or no user to run it as)"))
struct FencingTests {
    static let increment = #"{"target":"root","action":"incrementButtonTapped"}"#

    /// A node on `url`; `deaf` ones never hear another node's claim (as while their listening
    /// connection is down), so the fence alone must stop them.
    /// `gate`: each claim, once committed, waits for a signal before the node gets it.
    /// `outage`: while it is on, the node's commits and sweeps fail as when the database does not answer.
    /// `heldBack`: announcements reach the node only when the test delivers them (a NOTIFY in
    /// flight, a listener reconnecting). `maxSessions`: the node's session limit. `deletions`:
    /// how the node's deleting commits are held or paired (see `DeletionTiming`).
    static func node(_ url: String, deaf: Bool = false, gate: DispatchSemaphore? = nil, outage: StoreOutage? = nil,
                     heldBack: HeldAnnouncements? = nil, maxSessions: Int? = nil, deletions: DeletionTiming? = nil,
                     idleSessionTTL: Duration? = .seconds(3600)) async throws -> TestServer {
        let opened = try await openStore(url)
        let storage: any SharedSessionStorage = deaf || gate != nil || outage != nil || heldBack != nil || deletions != nil
            ? Interfered(opened, deaf: deaf, gate: gate, outage: outage, heldBack: heldBack, deletions: deletions) : opened
        return try await TestServer(storage: storage) {
            $0.store = .postgres
            $0.databaseURL = url
            $0.idleSessionTTL = idleSessionTTL
            $0.maxSessions = maxSessions
        }
    }

    @Test func theNodeThatWasTakenOverAnswers404WritesNothingAndClosesItsStreamsWithoutEnd() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let a = try await Self.node(url, deaf: true)
        let b = try await Self.node(url)
        let (id, token) = try await a.session("counter")
        let auth = [("Authorization", "Bearer \(token)")]
        let first = try await a.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment)
        #expect(first.status == 200)
        let stream = try await Self.openStream(on: a, id, token: token)

        let taken = try await b.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment)
        #expect(taken.status == 200, "the other node claims it and commits: \(taken.text)")
        #expect(taken.json["version"]?.intValue == 2, "on top of what the first node committed")

        let refused = try await a.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment)
        #expect(refused.status == 404, "\(refused.text)")
        #expect(refused.json["error"]?["code"]?.stringValue == "session_not_found")
        let closing = try await stream.readEventsUntilClosed()
        #expect(!closing.contains { $0.name == "end" }, "the session is not over: its stream closes without end")
        #expect(try await Self.query(url, "SELECT string_agg(version::text, ',' ORDER BY ordinal) FROM navd_transactions") == ["1,2"],
                "the fenced-off node wrote nothing")
        #expect(try await a.client().request("GET", "/metrics").text.contains("navd_sessions_released_total 1\n"))

        // Nothing of the refused request survives anywhere: the owner still counts 2.
        let owner = try await b.client().request("GET", "/sessions/\(id)", headers: auth)
        #expect(owner.json["state"]?["count"]?.intValue == 2)
        // Asked again, the first node claims it back, with every change the other made.
        let back = try await a.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment)
        #expect(back.status == 200)
        #expect(back.json["version"]?.intValue == 3)
        #expect(try await Self.query(url, "SELECT epoch FROM navd_sessions") == ["3"], "created (1), claimed by b (2), claimed back (3)")
        await a.stop()
        await b.stop()
    }

    @Test func racingNodesNeverBothCommitAVersionAndLoseNothingAcknowledged() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let nodes = [try await Self.node(url), try await Self.node(url)]
        let (id, token) = try await nodes[0].session("counter")
        // Each worker alternates between the nodes: the session is claimed back and forth.
        let answers = await withTaskGroup(of: [(status: Int, version: Int?)].self) { group in
            for worker in 0..<4 {
                group.addTask {
                    var answers: [(status: Int, version: Int?)] = []
                    for round in 0..<10 {
                        let node = nodes[(worker + round) % 2]
                        guard let answer = try? await node.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment) else { continue }
                        answers.append((answer.status, answer.json["version"]?.intValue))
                    }
                    return answers
                }
            }
            return await group.reduce(into: []) { $0 += $1 }
        }
        let statuses = Set(answers.map(\.status))
        let acked = answers.filter { $0.status == 200 }.compactMap(\.version)
        #expect(statuses.isSubset(of: [200, 404]), "\(statuses)")
        #expect(!acked.isEmpty)
        #expect(Set(acked).count == acked.count, "no version was acknowledged twice: \(acked.sorted())")
        // The node that lost the last claim hears of it through the store's notification, a
        // moment after the answer, and serves what it holds until then: asked until it has.
        var final = try await nodes[1].client().request("GET", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")])
        _ = await Self.eventually {
            final = try await nodes[1].client().request("GET", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")])
            return final.json["version"]?.intValue == acked.max()
        }
        #expect(final.json["state"]?["count"]?.intValue == acked.count, "every acknowledged increment, and nothing else")
        #expect(final.json["version"]?.intValue == acked.max())
        for node in nodes { await node.stop() }
    }

    /// A node whose listening connection was down while another took its session over hears of
    /// it once it listens again, without a request of its own: the stream closes without `end`.
    @Test func aNodeThatWasNotListeningLetsASessionTakenOverMeanwhileGo() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let a = try await Self.node(url)
        let b = try await Self.node(url)
        let (id, token) = try await a.session("counter")
        let stream = try await Self.openStream(on: a, id, token: token)

        // Every node's listening connection dropped; the claim comes before they are back (a second).
        let listening = "datname = current_database() AND query LIKE 'LISTEN%'"
        #expect(await Self.eventually { try await Self.query(url, "SELECT count(*) FROM pg_stat_activity WHERE \(listening)") == ["2"] })
        _ = try await Self.query(url, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE \(listening)")
        #expect(await Self.eventually { try await Self.query(url, "SELECT count(*) FROM pg_stat_activity WHERE \(listening)") == ["0"] })
        let taken = try await b.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment)
        #expect(taken.status == 200)

        let closing = try await stream.readEventsUntilClosed()
        #expect(!closing.contains { $0.name == "end" })
        #expect(try await a.client().request("GET", "/metrics").text.contains("navd_sessions_released_total 1\n"))
        await a.stop()
        await b.stop()
    }

    /// A session no node holds (its node stopped) expires on the node that is left; those in use
    /// there (an open stream, or requests) do not, whatever the TTL.
    @Test func sessionsNoNodeHoldsExpireAndOnesInUseDoNot() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let gone = try await Self.node(url)
        let (left, leftToken) = try await gone.session("counter")
        await gone.stop()
        let node = try await Self.node(url, idleSessionTTL: .seconds(1))
        let (watched, token) = try await node.session("counter")
        let stream = try await Self.openStream(on: node, watched, token: token)

        let (poked, pokedToken) = try await node.session("counter")
        let poking = Task {
            // A request every half second, and no stream.
            while !Task.isCancelled {
                _ = try? await node.client().request("GET", "/sessions/\(poked)", headers: [("Authorization", "Bearer \(pokedToken)")])
                try? await Task.sleep(for: .milliseconds(500))
            }
        }
        let kept = [watched, poked].sorted()
        #expect(await Self.eventually(within: .seconds(10)) { try await Self.query(url, "SELECT id FROM navd_sessions ORDER BY id") == kept })
        #expect(try await node.client().request("GET", "/sessions/\(left)", headers: [("Authorization", "Bearer \(leftToken)")]).status == 404)
        #expect(try await node.client().request("GET", "/metrics").text.contains("navd_sessions_swept_total 1\n"))
        // Twice the time after which they would have gone too, were their use not recorded.
        try await Task.sleep(for: .seconds(4))
        #expect(try await Self.query(url, "SELECT id FROM navd_sessions ORDER BY id") == kept)
        poking.cancel()
        let acted = try await node.client().request("POST", "/sessions/\(watched)/actions", token: token, json: Self.increment)
        #expect(acted.status == 200, "the session in use is alive: \(acted.text)")
        #expect(try await stream.readEvents { $0.name == "state" }.contains { $0.name == "end" } == false)
        await node.stop()
    }

    /// After the database was unreachable for longer than the TTL allows, every session's record
    /// of use is old, those in use included. The first node whose sweeps work again must not
    /// delete the sessions another node is using before that node could record them.
    @Test func aSessionInUseOnAnotherNodeOutlivesAnOutageLongerThanTheTTL() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let first = StoreOutage()
        let second = StoreOutage()
        // TTL 1 s: a round of 1 s, and a session goes once unrecorded for 3 s.
        let a = try await Self.node(url, outage: first, idleSessionTTL: .seconds(1))
        let b = try await Self.node(url, outage: second, idleSessionTTL: .seconds(1))
        let (id, token) = try await b.session("counter")
        let stream = try await Self.openStream(on: b, id, token: token)
        first.failing.store(true, ordering: .relaxed)
        second.failing.store(true, ordering: .relaxed)
        try await Task.sleep(for: .seconds(4))
        // The database answers node A first; B, a moment later, records the session it uses.
        first.failing.store(false, ordering: .relaxed)
        let before = first.recorded.load(ordering: .relaxed)
        #expect(await Self.eventually(within: .seconds(5)) { first.recorded.load(ordering: .relaxed) > before })
        second.failing.store(false, ordering: .relaxed)
        // A sweeps on, and would delete the session now were B's record not there.
        #expect(await Self.eventually(within: .seconds(8)) { first.recorded.load(ordering: .relaxed) >= before + 4 })
        #expect(try await Self.query(url, "SELECT id FROM navd_sessions") == [id])
        let acted = try await b.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment)
        #expect(acted.status == 200, "\(acted.text)")
        #expect(try await stream.readEvents { $0.name == "state" }.contains { $0.name == "end" } == false)
        await a.stop()
        await b.stop()
    }

    /// A node that writes nothing still finds out that the database stopped answering, and
    /// says so in `/readyz` before a request has to; and finds out when it answers again.
    @Test func readinessFollowsTheSharedStoreWhileTheNodeIsIdle() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let outage = StoreOutage()
        let node = try await Self.node(url, outage: outage)
        func ready() async throws -> Int { try await node.client().request("GET", "/readyz").status }
        #expect(try await ready() == 200)
        outage.failing.store(true, ordering: .relaxed)
        #expect(await Self.eventually(within: .seconds(10)) { try await ready() == 503 })
        outage.failing.store(false, ordering: .relaxed)
        #expect(await Self.eventually(within: .seconds(5)) { try await ready() == 200 })
        await node.stop()
    }

    /// `DELETE` that reaches another node than the one holding the session (a failover, or
    /// routers that disagree): the session is deleted without a takeover, and the holder's
    /// streams get `end` (`deleted`), as API.md asks, rather than closing to reconnect into a
    /// 404. A wrong token there deletes and moves nothing.
    @Test func aDeleteOnAnotherNodeEndsTheHoldersStreamsWithEnd() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let holder = try await Self.node(url)
        let other = try await Self.node(url)
        let (id, token) = try await holder.session("counter")
        let stream = try await Self.openStream(on: holder, id, token: token)
        let refused = try await other.client().request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer wrong")])
        #expect(refused.status == 401)
        #expect(try await Self.query(url, "SELECT epoch FROM navd_sessions") == ["\(SessionEpoch.created)"])
        let deleted = try await other.client().request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")])
        #expect(deleted.status == 204, "\(deleted.text)")
        let closing = try await stream.readEventsUntilClosed()
        #expect(closing.last?.name == "end")
        #expect(closing.last?.data["reason"] == "deleted")
        for node in [holder, other] {
            #expect(try await node.client().request("GET", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")]).status == 404)
        }
        #expect(try await other.client().request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")]).status == 404)
        #expect(try await holder.client().request("GET", "/metrics").text.contains("navd_sessions_released_total 0\n"),
                "a deletion is no takeover")
        await holder.stop()
        await other.stop()
    }

    /// A conditional `DELETE` on a node that does not hold the session compares the version
    /// the client saw with the session's durable one, as the holder would, in the store's
    /// transaction that deletes it: nothing is taken over, and the holder's streams get `end`.
    @Test func aConditionalDeleteOnAnotherNodeComparesTheVersion() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let holder = try await Self.node(url)
        let other = try await Self.node(url)
        let (id, token) = try await holder.session("counter")
        let auth = [("Authorization", "Bearer \(token)")]
        let moved = try await holder.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment)
        #expect(moved.json["version"]?.intValue == 1)
        let stream = try await Self.openStream(on: holder, id, token: token)
        let malformed = try await other.client().request("DELETE", "/sessions/\(id)", headers: auth + [("If-Match", "yesterday")])
        #expect(malformed.status == 400, "\(malformed.text)")
        let stale = try await other.client().request("DELETE", "/sessions/\(id)", headers: auth + [("If-Match", "\"0\"")])
        #expect(stale.status == 412, "\(stale.text)")
        #expect(stale.json["error"]?["code"] == "version_mismatch")
        #expect(try await holder.client().request("GET", "/sessions/\(id)", headers: auth).json["version"]?.intValue == 1, "still there")
        #expect(try await Self.query(url, "SELECT epoch FROM navd_sessions") == ["\(SessionEpoch.created)"],
                "nothing was taken over: the store compared the version")
        let current = try await other.client().request("DELETE", "/sessions/\(id)", headers: auth + [("If-Match", "\"1\"")])
        #expect(current.status == 204, "\(current.text)")
        let closing = try await stream.readEventsUntilClosed()
        #expect(closing.last?.name == "end" && closing.last?.data["reason"] == "deleted", "the holder ends it, as after its own DELETE")
        for node in [holder, other] {
            #expect(try await node.client().request("GET", "/sessions/\(id)", headers: auth).status == 404)
        }
        await holder.stop()
        await other.stop()
    }

    /// The holder hears of a deletion late, and meanwhile writes the session: the write finds
    /// the row gone, which is a deletion, not a takeover, so its streams still get `end`.
    @Test func aWriteThatFindsTheSessionDeletedEndsItsStreamsWithEnd() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let heard = HeldAnnouncements()
        let holder = try await Self.node(url, heldBack: heard)
        let other = try await Self.node(url)
        let (id, token) = try await holder.session("counter")
        let stream = try await Self.openStream(on: holder, id, token: token)
        #expect(try await other.client().request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")]).status == 204)
        let acted = try await holder.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment)
        #expect(acted.status == 404, "nothing was written: \(acted.text)")
        let closing = try await stream.readEventsUntilClosed()
        #expect(closing.last?.name == "end" && closing.last?.data["reason"] == "deleted", "\(closing.map(\.name))")
        #expect(await Self.eventually { heard.epochs(of: id).contains(SessionEpoch.deleted) })
        heard.deliver()
        #expect(try await holder.client().request("GET", "/metrics").text.contains("navd_sessions_released_total 0\n"),
                "a deletion is no takeover, heard late or not")
        await holder.stop()
        await other.stop()
    }

    /// A `DELETE` on the holder races one through another node: whichever is first, the session
    /// is deleted as both asked, and the holder's streams get `end`.
    @Test func aDeleteRacingOneOnAnotherNodeIsDeletedAsAsked() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let holder = try await Self.node(url, heldBack: HeldAnnouncements())
        let other = try await Self.node(url)
        let (id, token) = try await holder.session("counter")
        let stream = try await Self.openStream(on: holder, id, token: token)
        let remote = try await other.client().request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")])
        let local = try await holder.client().request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")])
        #expect(remote.status == 204 && local.status == 204, "\(remote.status) \(local.status) \(local.text)")
        let closing = try await stream.readEventsUntilClosed()
        #expect(closing.last?.name == "end" && closing.last?.data["reason"] == "deleted", "\(closing.map(\.name))")
        await holder.stop()
        await other.stop()
    }

    /// The holder's own `DELETE` is under way when a write of the session, refused because
    /// another node deleted it, is answered just before it: the refused write's rollback must not
    /// close the streams before the holder's `end`.
    @Test func aWriteRefusedAsDeletedDuringTheHoldersOwnDeleteLeavesTheEndToIt() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let timing = DeletionTiming(pairs: true)
        let holder = try await Self.node(url, heldBack: HeldAnnouncements(), deletions: timing)
        let other = try await Self.node(url)
        let (id, token) = try await holder.session("counter")
        let stream = try await Self.openStream(on: holder, id, token: token)
        #expect(try await other.client().request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")]).status == 204)
        let acting = Task { try await holder.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment) }
        #expect(await Self.eventually { timing.isKeepingAnAnswer }, "the write was refused as deleted, its answer kept")
        let local = try await holder.client().request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")])
        let acted = try await acting.value
        #expect(local.status == 204, "\(local.status) \(local.text)")
        #expect(acted.status == 404, "nothing was written, and the session is gone: \(acted.status) \(acted.text)")
        let closing = try await stream.readEventsUntilClosed()
        #expect(closing.last?.name == "end" && closing.last?.data["reason"] == "deleted", "\(closing.map(\.name))")
        await holder.stop()
        await other.stop()
    }

    /// A node's `DELETE` of a copy it has since let go and claimed back finds the row deleted by
    /// another node: it must not take the copy held now out of the store without ending it; the
    /// announcement of the deletion ends that one, with `end`.
    @Test func aStaleDeleteFindingTheRowGoneLeavesTheCopyHeldNowToTheAnnouncement() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let timing = DeletionTiming(holdsFirst: true)
        let heard = HeldAnnouncements()
        let a = try await Self.node(url, heldBack: heard, deletions: timing)
        let b = try await Self.node(url)
        let (id, token) = try await a.session("counter")
        let auth = [("Authorization", "Bearer \(token)")]
        let deleting = Task { try await a.client().request("DELETE", "/sessions/\(id)", headers: auth) }
        #expect(await Self.eventually { timing.isHolding })
        #expect(try await b.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment).status == 200)
        // a hears of b's claim and lets its copy go.
        #expect(await Self.eventually { heard.epochs(of: id).contains(2) })
        heard.deliver()
        #expect(try await Self.metric("navd_sessions_released_total", on: a) == 1)
        let stream = try await Self.openStream(on: a, id, token: token)   // a claims it back, epoch 3
        #expect(try await Self.query(url, "SELECT epoch FROM navd_sessions") == ["3"])
        #expect(await Self.eventually { try await Self.metric("navd_sessions_released_total", on: b) == 1 }, "b heard of a's claim")
        #expect(try await b.client().request("DELETE", "/sessions/\(id)", headers: auth).status == 204)
        timing.release()
        #expect(try await deleting.value.status == 204, "deleted, as asked")
        // Only now does a hear of b's deletion.
        #expect(await Self.eventually { heard.epochs(of: id).contains(SessionEpoch.deleted) })
        heard.deliver()
        let closing = try await stream.readEventsUntilClosed()
        #expect(closing.last?.name == "end" && closing.last?.data["reason"] == "deleted", "\(closing.map(\.name))")
        #expect(try await a.client().request("GET", "/metrics").text.contains("navd_sessions_open 0\n"))
        await a.stop()
        await b.stop()
    }

    /// Another node deletes the session while the holder's own `DELETE` is on its way, which
    /// leaves the end to it; that deletion fails (the database stops answering): the session is
    /// gone all the same, so the holder ends it, with `end`, rather than keep it open until the
    /// next write finds the row gone.
    @Test func aDeletionAnnouncedDuringTheHoldersFailingDeleteStillEndsTheSession() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let timing = DeletionTiming(holdsFirst: true)
        let outage = StoreOutage()
        let heard = HeldAnnouncements()
        let holder = try await Self.node(url, outage: outage, heldBack: heard, deletions: timing)
        let other = try await Self.node(url)
        let (id, token) = try await holder.session("counter")
        let auth = [("Authorization", "Bearer \(token)")]
        let stream = try await Self.openStream(on: holder, id, token: token)
        let deleting = Task { try await holder.client().request("DELETE", "/sessions/\(id)", headers: auth) }
        #expect(await Self.eventually { timing.isHolding })
        #expect(try await other.client().request("DELETE", "/sessions/\(id)", headers: auth).status == 204)
        // The holder hears of it, and leaves it to its own DELETE.
        #expect(await Self.eventually { heard.epochs(of: id).contains(SessionEpoch.deleted) })
        heard.deliver()
        outage.failing.store(true, ordering: .relaxed)
        timing.release()
        #expect(try await deleting.value.status == 503)
        outage.failing.store(false, ordering: .relaxed)
        let closing = try await stream.readEventsUntilClosed()
        #expect(closing.last?.name == "end" && closing.last?.data["reason"] == "deleted", "\(closing.map(\.name))")
        #expect(try await holder.client().request("GET", "/metrics").text.contains("navd_sessions_open 0\n"))
        #expect(try await holder.client().get("/sessions/\(id)", token: token).status == 404)
        await holder.stop()
        await other.stop()
    }

    /// A session its holder expired ends as expired on a node that still thinks it holds it
    /// (it missed the takeover), as after a sweep: the holder's expiry is remembered too.
    @Test func aSessionItsHolderExpiredEndsAsExpiredOnANodeThatMissedTheTakeover() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let stale = try await Self.node(url, deaf: true)
        let holder = try await Self.node(url, idleSessionTTL: .seconds(1))
        let (id, token) = try await stale.session("counter")
        let stream = try await Self.openStream(on: stale, id, token: token)
        #expect(try await holder.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment).status == 200)
        #expect(await Self.eventually(within: .seconds(10)) { try await Self.query(url, "SELECT count(*) FROM navd_sessions") == ["0"] })
        #expect(try await Self.query(url, "SELECT id FROM navd_expired") == [id])
        let refused = try await stale.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment)
        #expect(refused.status == 404, "\(refused.text)")
        let closing = try await stream.readEventsUntilClosed()
        #expect(closing.last?.name == "end" && closing.last?.data["reason"] == "expired", "\(closing.map(\.name))")
        await stale.stop()
        await holder.stop()
    }

    /// A full node takes no session over, but deleting one frees room and needs none.
    @Test func aFullNodeStillDeletesASessionItDoesNotHold() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let holder = try await Self.node(url)
        let full = try await Self.node(url, maxSessions: 1)
        let (id, token) = try await holder.session("counter")
        _ = try await full.session("counter")
        let deleted = try await full.client().request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")])
        #expect(deleted.status == 204, "\(deleted.text)")
        await holder.stop()
        await full.stop()
    }

    /// A session another node's sweep deleted (its holder could not record its use) ends where
    /// it is held, as expired.
    @Test func aSessionSweptElsewhereEndsItsStreamsAsExpired() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let outage = StoreOutage()
        let holder = try await Self.node(url, outage: outage, idleSessionTTL: .seconds(1))
        let sweeper = try await Self.node(url, idleSessionTTL: .seconds(1))
        let (id, token) = try await holder.session("counter")
        let stream = try await Self.openStream(on: holder, id, token: token)
        outage.failing.store(true, ordering: .relaxed)
        let closing = try await stream.readEventsUntilClosed()
        #expect(closing.last?.name == "end")
        #expect(closing.last?.data["reason"] == "expired")
        #expect(try await Self.query(url, "SELECT count(*) FROM navd_sessions") == ["0"])
        await holder.stop()
        await sweeper.stop()
    }

    /// A holder that did not hear of a sweep (its listening connection was down) finds the
    /// session gone at its next write, a change or a `DELETE`: the request is answered 404, as
    /// every other node would answer for a session that expired, and the streams get `end` with
    /// the reason the sweep announced, `expired`, not `deleted`.
    @Test(arguments: ["POST", "DELETE"])
    func aHolderThatMissedTheSweepEndsTheSessionAsExpiredAtItsNextWrite(method: String) async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        // No TTL of its own: only another node's sweep ends the session.
        let holder = try await Self.node(url, deaf: true, idleSessionTTL: nil)
        let (id, token) = try await holder.session("counter")
        let stream = try await Self.openStream(on: holder, id, token: token)
        #expect(try await Self.sweepElsewhere(url) == [id])
        let answer = method == "POST"
            ? try await holder.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment)
            : try await holder.client().request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")])
        #expect(answer.status == 404, "\(answer.text)")
        let closing = try await stream.readEventsUntilClosed()
        #expect(closing.last?.name == "end")
        #expect(closing.last?.data["reason"] == "expired")
        await holder.stop()
    }

    /// Deleting a session on a shared store announces the deletion to every node, this one
    /// included; its own streams still get `end` (`deleted`), not a close without it.
    @Test(arguments: 0..<5)
    func aDeletedSessionEndsItsStreamsWithEndOnASharedStore(round: Int) async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let node = try await Self.node(url)
        let (id, token) = try await node.session("counter")
        let stream = try await Self.openStream(on: node, id, token: token)
        #expect(try await node.client().request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")]).status == 204)
        let closing = try await stream.readEventsUntilClosed()
        #expect(closing.last?.name == "end")
        #expect(closing.last?.data["reason"] == "deleted")
        await node.stop()
    }

    /// Another node takes a session over again while this node's claim of it is finishing: the
    /// announcement comes before this node holds the session, and is acted on once it does.
    /// The request that claimed it claims again and answers with the state as it is now, never
    /// with the state from before the takeover.
    @Test func aTakeoverAnnouncedWhileTheClaimFinishesIsNotLost() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let gate = DispatchSemaphore(value: 0)
        let heard = HeldAnnouncements()
        let a = try await Self.node(url, gate: gate, heldBack: heard)
        let b = try await Self.node(url)
        let (id, token) = try await b.session("counter")
        let auth = [("Authorization", "Bearer \(token)")]
        let read = Task { try await a.client().request("GET", "/sessions/\(id)", headers: auth) }
        #expect(await Self.eventually { try await Self.query(url, "SELECT epoch FROM navd_sessions") == ["2"] }, "a's claim committed")
        // b was taken over; its next action claims the session back (if it had not heard, the
        // fence refuses the first, answered 404) and counts.
        var counted = try await b.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment)
        if counted.status == 404 {
            counted = try await b.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment)
        }
        #expect(counted.status == 200)
        #expect(counted.json["version"]?.intValue == 1)
        #expect(try await Self.query(url, "SELECT epoch FROM navd_sessions") == ["3"])
        // The announcement of b's claim reaches a while a's claim still waits.
        #expect(await Self.eventually { heard.epochs(of: id).contains(3) })
        heard.deliver()
        gate.signal()
        let answer = try await read.value
        #expect(answer.status == 200)
        #expect(answer.json["state"]?["count"]?.intValue == 1, "not the count from before b's change: \(answer.text)")
        #expect(answer.json["version"]?.intValue == 1)
        await a.stop()
        await b.stop()
    }

    /// A commit cut off in its `COMMIT`, whose outcome the store cannot learn (the database
    /// cannot be reached again at once), is answered 503 without the "nothing changed" of other
    /// failures. The node lets its copy go, which may be behind the store's: its streams close
    /// without `end`, and the next request claims the session again, with what the store holds.
    @Test func aCommitOfUnknownOutcomeLetsTheCopyGoAndTheNextRequestReadsTheStore() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let proxy = try PostgresFaultProxy(to: try PostgresServer.shared().port)
        defer { proxy.stop() }
        let node = try await Self.node(proxy.url(database: String(url.split(separator: "/").last ?? "")))
        let (id, token) = try await node.session("counter")
        let stream = try await Self.openStream(on: node, id, token: token)

        proxy.arm(.afterTheServer)
        proxy.refuseConnections(true)
        let cut = try await node.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment)
        #expect(cut.status == 503, "\(cut.text)")
        #expect(cut.json["error"]?["code"]?.stringValue == "storage_unavailable")
        #expect(cut.json["error"]?["message"]?.stringValue?.contains("may or may not be stored") == true, "\(cut.text)")
        let closing = try await stream.readEventsUntilClosed()
        #expect(!closing.contains { $0.name == "end" }, "the session is not over: its stream closes without end")

        proxy.refuseConnections(false)
        let next = try await node.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment)
        #expect(next.status == 200, "\(next.text)")
        #expect(next.json["version"]?.intValue == 2, "on top of the commit that was stored, though never answered")
        let read = try await node.client().request("GET", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")])
        #expect(read.json["state"]?["count"]?.intValue == 2)
        #expect(try await Self.query(url, "SELECT string_agg(version::text, ',' ORDER BY ordinal) FROM navd_transactions") == ["1,2"])
        await node.stop()
    }

    /// The same for a `DELETE`: answered 503 "may or may not", never "nothing changed", and the
    /// node does not go on serving a copy of a session the store may have deleted. Here it did:
    /// the next request finds it gone.
    @Test func aDeleteOfUnknownOutcomeLetsTheCopyGo() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let proxy = try PostgresFaultProxy(to: try PostgresServer.shared().port)
        defer { proxy.stop() }
        let node = try await Self.node(proxy.url(database: String(url.split(separator: "/").last ?? "")), deaf: true)
        let (id, token) = try await node.session("counter")
        let auth = [("Authorization", "Bearer \(token)")]

        proxy.arm(.afterTheServer)
        proxy.refuseConnections(true)
        let cut = try await node.client().request("DELETE", "/sessions/\(id)", headers: auth)
        #expect(cut.status == 503, "\(cut.text)")
        #expect(cut.json["error"]?["message"]?.stringValue?.contains("may or may not be stored") == true, "\(cut.text)")
        #expect(try await Self.query(url, "SELECT count(*) FROM navd_sessions") == ["0"], "the deletion was stored")

        proxy.refuseConnections(false)
        let after = try await node.client().request("GET", "/sessions/\(id)", headers: auth)
        #expect(after.status == 404, "the copy was let go; the store has no such session: \(after.text)")
        await node.stop()
    }

    /// A node that has not heard of a takeover yet is asked to resume a stream from an id only the
    /// new holder issued: it asks the store, lets its copy go, claims the session back, and the
    /// client resumes with exactly the events it missed, not a snapshot older than what it has.
    /// An id no node issued gets a snapshot and takes nothing over.
    @Test func aResumeFromAnIdThisNodeNeverIssuedReadsTheLatestCopy() async throws {
        let url = try await offThePool { try PostgresServer.freshDatabase() }
        let heard = HeldAnnouncements()
        let a = try await Self.node(url, heldBack: heard)
        let b = try await Self.node(url)
        let (id, token) = try await a.session("counter")
        let auth = [("Authorization", "Bearer \(token)")]
        #expect(try await a.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment).status == 200)
        // b takes it over and counts twice; a does not hear of it.
        let seen = try await b.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment)
        let missed = try await b.client().request("POST", "/sessions/\(id)/actions", token: token, json: Self.increment)
        let seenID = try #require(seen.json["events"]?.arrayValue?.last?["id"]?.intValue)
        let missedIDs = try #require(missed.json["events"]?.arrayValue).compactMap { $0["id"]?.intValue }
        #expect(!missedIDs.isEmpty && missed.json["version"]?.intValue == 3)
        #expect(await Self.eventually { heard.epochs(of: id).contains(2) }, "a's announcement is held back")

        let stream = try a.client()
        try await stream.send(LoopbackClient.format("GET", "/sessions/\(id)/events", headers: auth + [("Last-Event-ID", String(seenID))]))
        #expect(try await stream.readResponse().status == 200)
        let resumed = try await stream.readEvents { $0.id == missedIDs.last }
        #expect(resumed.map(\.id) == missedIDs, "exactly what the client missed, no snapshot: \(resumed.map(\.name))")
        #expect(try await Self.query(url, "SELECT epoch FROM navd_sessions") == ["3"], "a claimed it back")
        let read = try await a.client().request("GET", "/sessions/\(id)", headers: auth)
        #expect(read.json["version"]?.intValue == 3 && read.json["state"]?["count"]?.intValue == 3, "\(read.text)")

        // An id nobody issued, on the node that holds the session: a snapshot, and no claim.
        let made = try a.client()
        try await made.send(LoopbackClient.format("GET", "/sessions/\(id)/events", headers: auth + [("Last-Event-ID", "999999")]))
        #expect(try await made.readResponse().status == 200)
        let first = try #require(try await made.readEvents { _ in true }.first)
        #expect(first.name == "snapshot" && first.id == missedIDs.last)
        #expect(try await Self.query(url, "SELECT epoch FROM navd_sessions") == ["3"])
        await a.stop()
        await b.stop()
    }

    /// A stream of session `id` on `node`, read up to its snapshot.
    static func openStream(on node: TestServer, _ id: String, token: String) async throws -> LoopbackClient {
        let stream = try node.client()
        try await stream.send(LoopbackClient.format("GET", "/sessions/\(id)/events", headers: [("Authorization", "Bearer \(token)")]))
        #expect(try await stream.readResponse().status == 200)
        _ = try await stream.readEvents { $0.name == "snapshot" }
        return stream
    }

    /// Polls an async condition every 50 ms, for at most `limit`; errors count as not yet.
    static func eventually(within limit: Duration = .seconds(5), _ condition: () async throws -> Bool) async -> Bool {
        let deadline = ContinuousClock.now + limit
        while ContinuousClock.now < deadline {
            if (try? await condition()) == true { return true }
            try? await Task.sleep(for: .milliseconds(50))
        }
        // Once more: a busy pool may resume the wait after its deadline.
        return (try? await condition()) == true
    }

    /// The value of an unlabelled counter or gauge in `node`'s `/metrics`.
    static func metric(_ name: String, on node: TestServer) async throws -> Int? {
        let text = try await node.client().request("GET", "/metrics").text
        let line = text.split(separator: "\n").first { $0.hasPrefix(name + " ") }
        return line.flatMap { Int($0.dropFirst(name.count + 1)) }
    }

    /// A store on `url`, opened as navd opens it.
    static func openStore(_ url: String) async throws -> any SharedSessionStorage {
        var configuration = ServerConfiguration()
        configuration.store = .postgres
        configuration.databaseURL = url
        // libpq's connect blocks: off the cooperative pool, which other tests' servers share.
        let settings = configuration
        return try #require(try await offThePool { try NavigationServer.openStorage(settings) } as? any SharedSessionStorage)
    }

    /// Sweeps `url`'s sessions from a store of its own, as another node would, once every
    /// session has gone unused for two minutes; what it expired.
    static func sweepElsewhere(_ url: String) async throws -> [String] {
        let sweeper = try await openStore(url)
        defer { sweeper.close() }
        var swept: [String] = []
        // Nodes record their sessions' use now and then; sweep again if one just did.
        for _ in 0..<3 where swept.isEmpty {
            _ = try await query(url, "UPDATE navd_sessions SET last_active = last_active - 120")
            swept = try await withCheckedContinuation { done in
                sweeper.sweep(inUse: [], idle: .seconds(60)) { done.resume(returning: $0) }
            }.get()
        }
        return swept
    }

    static func query(_ url: String, _ sql: String) async throws -> [String] {
        let database = String(url.split(separator: "/").last ?? "")
        return try await offThePool { try PostgresServer.shared().query(sql, database: database) }
    }
}

/// How a node's deleting commits are timed: with `holdsFirst`, its first is held until
/// `release()`; with `pairs`, a write refused as deleted is answered just before its DELETE.
final class DeletionTiming: Sendable {
    let holdsFirst: Bool
    let pairs: Bool
    private let held = Mutex<(used: Bool, submit: (@Sendable () -> Void)?)>((false, nil))
    private let kept = Mutex<(@Sendable () -> Void)?>(nil)

    init(holdsFirst: Bool = false, pairs: Bool = false) {
        self.holdsFirst = holdsFirst
        self.pairs = pairs
    }

    /// Keeps `submit` for `release()` if this is the first deletion to hold; false otherwise.
    func hold(_ submit: @escaping @Sendable () -> Void) -> Bool {
        guard holdsFirst else { return false }
        return held.withLock { held in
            guard !held.used else { return false }
            held = (true, submit)
            return true
        }
    }

    var isHolding: Bool { held.withLock { $0.submit != nil } }
    var isKeepingAnAnswer: Bool { kept.withLock { $0 != nil } }
    func release() { held.withLock { $0.submit.take() }?() }
    func keep(_ answer: @escaping @Sendable () -> Void) { kept.withLock { $0 = answer } }
    func answerKept() { kept.withLock { $0.take() }?() }
}

/// Announcements of other nodes' claims and deletions, held back from a node until the test
/// delivers them: a NOTIFY in flight, or a listener reconnecting, for exactly as long as an
/// ordering needs, where a delay would be too short on a busy machine or needlessly long.
final class HeldAnnouncements: Sendable {
    private let held = Mutex<[(id: String, epoch: Int, hear: @Sendable () -> Void)]>([])

    func hold(_ id: String, epoch: Int, _ hear: @escaping @Sendable () -> Void) {
        held.withLock { $0.append((id, epoch, hear)) }
    }

    /// The epochs announced for session `id` and not yet delivered.
    func epochs(of id: String) -> [Int] { held.withLock { $0.filter { $0.id == id }.map(\.epoch) } }

    /// Hands the node every announcement held so far, in the order they came; later ones are
    /// held in turn. The node has acted on them when this returns.
    func deliver() {
        let due = held.withLock { held in
            defer { held = [] }
            return held
        }
        for announcement in due { announcement.hear() }
    }
}

/// Commits and sweeps of a node that fail while `failing` is on, as while the database is
/// unreachable; `recorded` counts the sweeps that were made.
final class StoreOutage: Sendable {
    let failing = Atomic<Bool>(false)
    let recorded = Atomic<Int>(0)
}

/// A shared store with a fault put in: `deaf`, the node never hears of other nodes' claims;
/// with a `gate`, its first claim, once committed, reaches the node only when the test says so;
/// with an `outage`, its commits and sweeps fail while the test says so; `heldBack`, it hears
/// announcements when the test delivers them; `deletions`, its deleting commits are timed by the test.
private final class Interfered: SharedSessionStorage {
    let store: any SharedSessionStorage
    let deaf: Bool
    let gate: DispatchSemaphore?
    let outage: StoreOutage?
    let heldBack: HeldAnnouncements?
    let deletions: DeletionTiming?
    let gated = Atomic<Bool>(false)
    init(_ store: any SharedSessionStorage, deaf: Bool, gate: DispatchSemaphore?, outage: StoreOutage?, heldBack: HeldAnnouncements?,
         deletions: DeletionTiming? = nil) {
        self.store = store
        self.deaf = deaf
        self.gate = gate
        self.outage = outage
        self.heldBack = heldBack
        self.deletions = deletions
    }

    func load(within memory: Int, perSession: Int, _ each: (StoredSession) -> Void) throws(StorageError) -> [String] { try store.load(within: memory, perSession: perSession, each) }
    func commit(_ writes: [StoreWrite], admissible: @escaping @Sendable () -> Bool, completion: @escaping @Sendable (Result<Void, StorageError>) -> Void) {
        if outage?.failing.load(ordering: .relaxed) == true { return completion(.failure(.unavailable("PostgreSQL: no answer"))) }
        guard let deletions else { return store.commit(writes, admissible: admissible, completion: completion) }
        let deletes = writes.contains { if case .delete = $0 { true } else { false } }
        if deletes, deletions.hold({ [store, outage] in
            // Released into an outage, it fails as any commit then does.
            if outage?.failing.load(ordering: .relaxed) == true { return completion(.failure(.unavailable("PostgreSQL: no answer"))) }
            store.commit(writes, admissible: admissible, completion: completion)
        }) { return }
        guard deletions.pairs else { return store.commit(writes, admissible: admissible, completion: completion) }
        let transacts = writes.contains { if case .transaction = $0 { true } else { false } }
        store.commit(writes, admissible: admissible) { result in
            // A write refused as deleted is answered together with, just before, the node's own
            // DELETE: as when both share one group commit.
            if transacts, case .failure(.deleted) = result { return deletions.keep { completion(result) } }
            if deletes { deletions.answerKept() }
            completion(result)
        }
    }
    func close() { store.close() }
    func statistics() -> StorageStatistics { store.statistics() }
    func claim(_ id: String, authorize: @escaping @Sendable ([UInt8]) -> Bool, restore: @escaping @Sendable (StoredSession, Int) -> Bool,
               completion: @escaping @Sendable (Result<SessionClaim, StorageError>) -> Void) {
        let held = gate.flatMap { gated.exchange(true, ordering: .relaxed) ? nil : $0 }
        store.claim(id, authorize: authorize, restore: restore) { result in
            held?.wait()
            completion(result)
        }
    }
    func delete(_ id: String, ifVersion: Int?, authorize: @escaping @Sendable ([UInt8]) -> Bool,
                completion: @escaping @Sendable (Result<SessionDeletion, StorageError>) -> Void) {
        store.delete(id, ifVersion: ifVersion, authorize: authorize, completion: completion)
    }
    func onTakeover(held: @escaping @Sendable () -> [String], _ body: @escaping @Sendable (String, Int) -> Void) {
        guard !deaf else { return }
        guard let heldBack else { return store.onTakeover(held: held, body) }
        store.onTakeover(held: held) { id, epoch in heldBack.hold(id, epoch: epoch) { body(id, epoch) } }
    }
    func currentEpoch(of id: String, completion: @escaping @Sendable (Result<Int, StorageError>) -> Void) {
        store.currentEpoch(of: id, completion: completion)
    }
    func sweep(inUse: [String], idle: Duration?, completion: @escaping @Sendable (Result<[String], StorageError>) -> Void) {
        guard let outage else { return store.sweep(inUse: inUse, idle: idle, completion: completion) }
        if outage.failing.load(ordering: .relaxed) { return completion(.failure(.unavailable("PostgreSQL: no answer"))) }
        store.sweep(inUse: inUse, idle: idle) { result in
            if case .success = result { outage.recorded.add(1, ordering: .relaxed) }
            completion(result)
        }
    }
}
