import Foundation
import SQLiteStorage
import Testing
import TestSupport

/// A durable change is answered straight from the store's notice, before the session's loop has
/// heard of it; what the client asks next must still find the session caught up.
@Suite(.serialized) struct DurableAnswerTests {
    /// After each 200, a stream opened at once, on a fresh connection (on either loop), starts
    /// from a snapshot of that very version, with the answer's last event id.
    @Test func aStreamOpenedRightAfterADurableAnswerStartsFromIt() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("navd-answer-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try SQLiteSessionStore(directory: directory, retention: .init(count: 1024, bytes: 1 << 20))
        let server = try await TestServer(storage: store)
        var sessions: [(id: String, token: String)] = []
        for _ in 0..<4 { sessions.append(try await server.session("counter")) }
        for round in 0..<40 {
            let (id, token) = sessions[round % sessions.count]
            let answer = try await server.client().act(id, token: token, "incrementButtonTapped")
            #expect(answer.status == 200)
            let stream = try server.client()
            try await stream.send(LoopbackClient.format("GET", "/sessions/\(id)/events", headers: [("Authorization", "Bearer \(token)")]))
            #expect(try await stream.readResponse().status == 200)
            let snapshot = try #require(try await stream.readEvents { _ in true }.first)
            #expect(snapshot.name == "snapshot")
            #expect(snapshot.id == answer.json["events"]?.arrayValue?.last?["id"]?.intValue, "round \(round)")
            #expect(snapshot.data["version"] == answer.json["version"], "round \(round)")
        }
        await server.stop()
        store.close()
    }
}
