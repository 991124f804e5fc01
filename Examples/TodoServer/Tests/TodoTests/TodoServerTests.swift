import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import NavServer
import NavigationCore
import Testing
import Todo

/// The to-do feature served by an embedded server on a loopback port, driven over HTTP as any
/// client would: create a session, act, read `GET /navigation`.
@Suite struct TodoServerTests {
    @Test func addingAnItemGoesThroughASheetWithATextBinding() async throws {
        try await withServer { client in
            let session = try await client.createSession()
            try await client.act(session, "addButtonTapped")
            let sheet = try #require(try await client.navigation(session)["presentations"]?[0])
            #expect(sheet["slot"] == "destination.addItem")
            #expect(sheet["style"] == "sheet")
            let sheetID = try #require(sheet["id"]?.stringValue)

            let typed = try await client.send("PUT", "/sessions/\(session.id)/features/\(sheetID)/bindings/title", session.token, #""Buy milk""#)
            #expect(typed.status == 200)
            #expect(try await client.navigation(session)["presentations"]?[0]?["state"]?["title"] == "Buy milk")

            try await client.act(session, "saveButtonTapped", target: sheetID)
            let tree = try await client.navigation(session)
            #expect(tree["presentations"]?.arrayValue?.isEmpty == true)
            #expect(tree["state"]?["items"] == [["id": "t1", "title": "Buy milk", "isDone": false]])
        }
    }

    @Test func aBlankTitleKeepsTheSheetUp() async throws {
        try await withServer { client in
            let session = try await client.createSession()
            try await client.act(session, "addButtonTapped")
            let sheetID = try #require(try await client.navigation(session)["presentations"]?[0]?["id"]?.stringValue)
            try await client.act(session, "saveButtonTapped", target: sheetID)
            let tree = try await client.navigation(session)
            #expect(tree["presentations"]?[0]?["id"]?.stringValue == sheetID)
            #expect(tree["state"]?["items"] == [])
        }
    }

    @Test func deletingFromTheDetailAsksInADialog() async throws {
        try await withServer { client in
            let session = try await client.createSession(state: #"{"items":[{"id":"t1","title":"Milk"},{"id":"t2","title":"Eggs"}]}"#)
            try await client.act(session, "itemTapped", args: #"{"item":"t1"}"#)
            let detail = try #require(try await client.navigation(session)["presentations"]?[0])
            #expect(detail["style"] == "drillDown")
            #expect(detail["feature"] == "detail")
            #expect(detail["state"]?["item"]?["title"] == "Milk")
            let detailID = try #require(detail["id"]?.stringValue)

            // Cancel leaves the item and the detail where they were.
            try await client.act(session, "deleteButtonTapped", target: detailID)
            let dialog = try #require(try await client.navigation(session)["presentations"]?[0]?["presentations"]?[0])
            #expect(dialog["style"] == "confirmationDialog")
            #expect(dialog["alert"]?["title"] == #"Delete "Milk"?"#)
            #expect(dialog["alert"]?["buttons"] == [
                ["id": "delete", "label": "Delete", "role": "destructive"],
                ["id": "cancel", "label": "Cancel", "role": "cancel"],
            ])
            let cancelled = try await client.send("POST", "/sessions/\(session.id)/presentations/\(try #require(dialog["id"]?.stringValue))/dismiss",
                                                  session.token, #"{"button":"cancel"}"#)
            #expect(cancelled.status == 200)
            var tree = try await client.navigation(session)
            #expect(tree["presentations"]?[0]?["id"]?.stringValue == detailID)
            #expect(tree["presentations"]?[0]?["presentations"]?.arrayValue?.isEmpty == true)
            #expect(tree["state"]?["items"]?.arrayValue?.count == 2)

            // The destructive button deletes the item and leaves the detail.
            try await client.act(session, "deleteButtonTapped", target: detailID)
            let again = try #require(try await client.navigation(session)["presentations"]?[0]?["presentations"]?[0]?["id"]?.stringValue)
            let deleted = try await client.send("POST", "/sessions/\(session.id)/presentations/\(again)/dismiss", session.token, #"{"button":"delete"}"#)
            #expect(deleted.status == 200)
            tree = try await client.navigation(session)
            #expect(tree["presentations"]?.arrayValue?.isEmpty == true)
            #expect(tree["state"]?["items"] == [["id": "t2", "title": "Eggs", "isDone": false]])
        }
    }

    @Test func tappingAnItemThatIsNotThereIsRefused() async throws {
        try await withServer { client in
            let session = try await client.createSession()
            let response = try await client.send("POST", "/sessions/\(session.id)/actions", session.token,
                                                 #"{"target":"root","action":"itemTapped","args":{"item":"t9"}}"#)
            #expect(response.status == 422)
            #expect(try await client.navigation(session)["presentations"]?.arrayValue?.isEmpty == true)
        }
    }

    @Test func theCatalogListsEveryScreenOfTheFeature() async throws {
        try await withServer { client in
            let features = try await client.send("GET", "/features", nil, nil).json["features"]?.arrayValue ?? []
            let names = features.compactMap { $0["name"]?.stringValue }
            #expect(Set(names).isSuperset(of: ["todos", "detail", "addItem", "deleteConfirmation"]))
            #expect(features.first { $0["name"] == "todos" }?["hostable"] == true)
            #expect(features.first { $0["name"] == "detail" }?["hostable"] == false)
        }
    }
}

/// Starts an embedded server on a free loopback port, runs `body`, and stops it.
private func withServer(_ body: (Client) async throws -> Void) async throws {
    var configuration = ServerConfiguration()
    configuration.port = 0
    configuration.logRequests = false
    let server = NavigationServer(configuration: configuration, storage: nil) { _ in TodoFeature.catalog() }
    try await server.start()
    do {
        try await body(Client(port: server.port))
    } catch {
        await server.shutdown(within: .seconds(1))
        throw error
    }
    await server.shutdown(within: .seconds(1))
}

/// A few lines of HTTP over URLSession, to 127.0.0.1 only.
private struct Client {
    let port: Int

    struct Session {
        let id: String
        let token: String
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    func send(_ method: String, _ path: String, _ token: String?, _ body: String?) async throws -> (status: Int, json: JSON) {
        guard let url = URL(string: "http://127.0.0.1:\(port)\(path)") else { throw Failure(description: "bad path \(path)") }
        var request = URLRequest(url: url)
        request.httpMethod = method
        if let token { request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization") }
        if let body {
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(body.utf8)
        }
        let (data, response) = try await URLSession.shared.data(for: request)
        guard let http = response as? HTTPURLResponse else { throw Failure(description: "not HTTP") }
        return (http.statusCode, data.isEmpty ? .null : try JSONParser.parse([UInt8](data)))
    }

    func createSession(state: String? = nil) async throws -> Session {
        let body = state.map { #"{"feature":"todos","state":\#($0)}"# } ?? #"{"feature":"todos"}"#
        let created = try await send("POST", "/sessions", nil, body)
        guard created.status == 201, let id = created.json["id"]?.stringValue, let token = created.json["token"]?.stringValue else {
            throw Failure(description: "create: \(created.status)")
        }
        return Session(id: id, token: token)
    }

    func act(_ session: Session, _ action: String, target: String = "root", args: String = "{}") async throws {
        let sent = try await send("POST", "/sessions/\(session.id)/actions", session.token,
                                  #"{"target":"\#(target)","action":"\#(action)","args":\#(args)}"#)
        guard sent.status == 200 else { throw Failure(description: "\(action): \(sent.status) \(sent.json)") }
    }

    func navigation(_ session: Session) async throws -> JSON {
        let read = try await send("GET", "/sessions/\(session.id)/navigation", session.token, nil)
        guard read.status == 200 else { throw Failure(description: "navigation: \(read.status)") }
        return read.json
    }
}
