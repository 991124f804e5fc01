import Foundation
@testable import NavServer
import NavigationCore
import Synchronization
import Testing
import TestSupport

/// `POST /sessions/{id}/stream-tickets` and `GET …/events?ticket=`, as API.md specifies them.
@Suite(.serialized) struct StreamTicketTests {
    func ticket(_ server: TestServer, _ id: String, _ token: String) async throws -> String {
        let response = try await server.client().request("POST", "/sessions/\(id)/stream-tickets",
                                                         headers: [("Authorization", "Bearer \(token)")])
        #expect(response.status == 201)
        return try #require(response.json["ticket"]?.stringValue)
    }

    /// Opens `target`: the answer, and for a stream (no `Content-Length`) the client positioned after its head.
    func open(_ server: TestServer, _ target: String) async throws -> (status: Int, response: LoopbackClient.Response, client: LoopbackClient) {
        let client = try server.client()
        let response = try await client.request("GET", target)
        return (response.status, response, client)
    }

    @Test func aTicketIsIssuedOnlyForTheBearerToken() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        let issued = try await client.request("POST", "/sessions/\(id)/stream-tickets", headers: [("Authorization", "Bearer \(token)")])
        #expect(issued.status == 201)
        #expect(issued.header("content-type") == "application/json; charset=utf-8")
        #expect(issued.header("cache-control") == "no-store")
        #expect(issued.json["expiresIn"] == .int(60))
        let ticket = try #require(issued.json["ticket"]?.stringValue)
        #expect(ticket.utf8.count == 64 && ticket.utf8.allSatisfy { ASCIIHex.contains($0) })
        #expect(issued.json.objectValue?.keys.sorted() == ["expiresIn", "ticket"])
        #expect(try await self.ticket(server, id, token) != ticket, "every ticket is new")

        // The token in the query is for the stream alone; a ticket never mints another.
        #expect(try await client.request("POST", "/sessions/\(id)/stream-tickets?token=\(token)").status == 401)
        #expect(try await client.request("POST", "/sessions/\(id)/stream-tickets?ticket=\(ticket)").status == 401)
        #expect(try await client.request("POST", "/sessions/\(id)/stream-tickets", headers: [("Authorization", "Bearer \(String(repeating: "0", count: 64))")]).status == 401)
        #expect(try await client.request("POST", "/sessions/\(String(repeating: "a", count: 32))/stream-tickets", headers: [("Authorization", "Bearer \(token)")]).status == 404)
        #expect(try await client.request("GET", "/sessions/\(id)/stream-tickets", headers: [("Authorization", "Bearer \(token)")]).status == 405)
        await server.stop()
    }

    @Test func aTicketOpensOneStreamOfItsSessionOnce() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let (other, otherToken) = try await server.session("counter")
        let ticket = try await ticket(server, id, token)

        // Another session's stream does not take it, and that does not use it up.
        let (elsewhere, _, _) = try await open(server, "/sessions/\(other)/events?ticket=\(ticket)")
        #expect(elsewhere == 401)
        // HEAD checks it without using it up.
        #expect(try await server.client().request("HEAD", "/sessions/\(id)/events?ticket=\(ticket)").status == 200)

        let (status, _, stream) = try await open(server, "/sessions/\(id)/events?ticket=\(ticket)")
        #expect(status == 200)
        let snapshot = try #require(try await stream.readEvents { _ in true }.first)
        #expect(snapshot.name == "snapshot" && snapshot.data["navigation"]?["feature"] == "counter")
        _ = try await server.client().act(id, token: token, "incrementButtonTapped")
        #expect(try await stream.readEvents { _ in true }.map(\.name) == ["state"])

        let (again, refused, _) = try await open(server, "/sessions/\(id)/events?ticket=\(ticket)")
        #expect(again == 401)
        #expect(refused.json["error"]?["code"] == "unauthorized")
        #expect(refused.header("www-authenticate") == "Bearer")
        #expect(try await open(server, "/sessions/\(id)/events?ticket=\(String(repeating: "f", count: 64))").status == 401)
        #expect(try await open(server, "/sessions/\(id)/events?ticket=").status == 401)

        // `?token=` keeps working for curl, and the other session's own ticket opens only it.
        #expect(try await open(server, "/sessions/\(id)/events?token=\(token)").status == 200)
        let otherTicket = try await self.ticket(server, other, otherToken)
        #expect(try await open(server, "/sessions/\(id)/events?ticket=\(otherTicket)").status == 401)
        #expect(try await open(server, "/sessions/\(other)/events?ticket=\(otherTicket)").status == 200)
        await server.stop()
    }

    @Test func aTicketResumesAfterLastEventID() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let client = try server.client()
        for _ in 0..<3 { _ = try await client.act(id, token: token, "incrementButtonTapped") }
        let ticket = try await ticket(server, id, token)
        let (status, _, stream) = try await open(server, "/sessions/\(id)/events?ticket=\(ticket)&lastEventId=1")
        #expect(status == 200)
        #expect(try await stream.readEvents { $0.id == 3 }.map(\.id) == [2, 3])
        await server.stop()
    }

    @Test func ticketsEndWithTheirSession() async throws {
        let server = try await TestServer()
        let (id, token) = try await server.session("counter")
        let ticket = try await ticket(server, id, token)
        #expect(try await server.client().request("DELETE", "/sessions/\(id)", headers: [("Authorization", "Bearer \(token)")]).status == 204)
        #expect(try await open(server, "/sessions/\(id)/events?ticket=\(ticket)").status == 404)
        await server.stop()
    }

    /// Neither a ticket nor a token sent in a query reaches the request log, whatever the case of
    /// its name, nor under a name navd does not read: the log shows only the parameters navd
    /// reads, but for the credentials.
    @Test func credentialsInAQueryNeverReachTheRequestLog() async throws {
        let navd = try ProcessTests.Running(["--port", "0", "--store", "memory"])
        try navd.waitUntilListening()
        let created = try await LoopbackClient(port: navd.port).request("POST", "/sessions", json: #"{"feature":"counter"}"#)
        let id = try #require(created.json["id"]?.stringValue)
        let token = try #require(created.json["token"]?.stringValue)
        let client = try LoopbackClient(port: navd.port)
        let issued = try await client.request("POST", "/sessions/\(id)/stream-tickets", headers: [("Authorization", "Bearer \(token)")])
        let ticket = try #require(issued.json["ticket"]?.stringValue)
        #expect(try await client.request("HEAD", "/sessions/\(id)/events?ticket=\(ticket)&lastEventId=0&x=1").status == 200)
        #expect(try await client.request("HEAD", "/sessions/\(id)/events?TICKET=\(ticket)&Token=\(token)").status == 401)
        // Spellings of a token navd does not read as one: one parameter each, left out whole.
        #expect(try await client.request("GET", "/sessions/\(id)/navigation?a%26token%3D\(token)=1%0A").status == 401)
        #expect(try await client.request("GET", "/sessions/\(id)/navigation?x=1;token=\(token)").status == 401)
        #expect(try await client.request("GET", "/sessions/\(id)/navigation?token%00=\(token)").status == 401)
        let stream = try LoopbackClient(port: navd.port)
        #expect(try await stream.request("GET", "/sessions/\(id)/events?ticket=\(ticket)").status == 200)
        #expect(try await client.request("GET", "/sessions/\(id)/events?ticket=\(ticket)").status == 401)
        navd.process.terminate()
        #expect(await navd.wait(timeout: .seconds(5)))
        let log = String(decoding: navd.output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(!log.contains(ticket) && !log.contains(token))
        #expect(log.contains(#""path":"/sessions/\#(id)/events?lastEventId=0","#))
        #expect(log.contains("/stream-tickets"))
        #expect(log.components(separatedBy: #""path":"/sessions/\#(id)/navigation","#).count == 4, "three requests, logged without their query")
        #expect(!log.contains("x=1"))
    }

    @Test func ticketsExpireAfterTheirLifetime() {
        let clock = ManualClock()
        let tickets = StreamTickets(lifetime: .seconds(60), limit: 4, now: { clock.now })
        let early = tickets.issue()
        clock.advance(.seconds(59))
        let late = tickets.issue()
        #expect(tickets.redeem(early, consume: false))
        clock.advance(.seconds(1))
        #expect(!tickets.redeem(early), "60 s after it was issued")
        #expect(tickets.count == 1, "the expired ticket was purged")
        #expect(tickets.redeem(late))
        #expect(!tickets.redeem(late), "used once")
        #expect(tickets.count == 0)
    }

    @Test func outstandingTicketsAreCappedOldestFirst() {
        let clock = ManualClock()
        let tickets = StreamTickets(lifetime: .seconds(60), limit: 4, now: { clock.now })
        let issued = (0..<6).map { _ in tickets.issue() }
        #expect(tickets.count == 4)
        #expect(!tickets.redeem(issued[0]) && !tickets.redeem(issued[1]))
        for ticket in issued[2...] { #expect(tickets.redeem(ticket)) }
    }
}

private let ASCIIHex = Set("0123456789abcdef".utf8)

/// A clock the test moves by hand.
private final class ManualClock: Sendable {
    private let start = ContinuousClock.now
    private let offset = Mutex<Duration>(.zero)
    var now: ContinuousClock.Instant { start + offset.withLock { $0 } }
    func advance(_ by: Duration) { offset.withLock { $0 += by } }
}
