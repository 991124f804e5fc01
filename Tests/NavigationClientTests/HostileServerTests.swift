import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import NavigationClient
import Synchronization
import Testing
@testable import TestSupport
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the client does with a server that is buggy, hostile or not navd at all: bounded in
/// memory and depth, never applying an event over a gap, backing off when it keeps falling out
/// of step, and never held by an answer that does not end.
struct HostileStreamParsingTests {
    /// The rest of an event over the limit is not an event of its own, however its lines fall.
    @Test func theTailOfAnOversizedEventIsNotDispatched() {
        var parser = ServerSentEventParser()
        parser.maxEventBytes = 16
        let events = parser.feed(Array("id: 5\nevent: snapshot\ndata: 0123456789abcdefghij\ndata: {}\nevent: end\n\nid: 6\ndata: ok\n\n".utf8))
        #expect(parser.oversizedEvents == 1)
        #expect(events == [ServerSentEvent(id: "6", type: "message", data: "ok")])
    }

    /// A reader that cannot go on past a gap gets nothing after an oversized event, even what
    /// arrived in the same bytes.
    @Test func aParserThatStopsAtAnOversizedEventDispatchesNothingAfterIt() {
        var parser = ServerSentEventParser()
        parser.maxEventBytes = 16
        parser.stopsAtOversizedEvent = true
        let events = parser.feed(Array("id: 1\ndata: a\n\nid: 2\ndata: 0123456789abcdefghij\n\nid: 3\ndata: c\n\n".utf8))
        #expect(events == [ServerSentEvent(id: "1", type: "message", data: "a")])
        #expect(parser.oversizedEvents == 1)
        #expect(parser.feed(Array("id: 4\ndata: d\n\n".utf8)).isEmpty)
    }

    /// Many empty data lines cost a byte each: what an event keeps stays within the limit.
    @Test func emptyDataLinesCountAgainstTheLimit() {
        var parser = ServerSentEventParser()
        parser.maxEventBytes = 1000
        let lines = String(repeating: "data:\n", count: 1200) + "\n" + String(repeating: "data:\n", count: 900) + "\n"
        let events = parser.feed(Array(lines.utf8))
        #expect(parser.oversizedEvents == 1)
        #expect(events.map(\.data) == [String(repeating: "\n", count: 899)])
    }

    /// An event without an `id:` of its own carries the last one (as the spec says) but is marked
    /// as not its own.
    @Test func anInheritedIdIsNotTheEventsOwn() {
        var parser = ServerSentEventParser()
        let events = parser.feed(Array("id: 1\ndata: a\n\ndata: b\n\nid: \0x\ndata: c\n\n".utf8))
        #expect(events.map(\.id) == ["1", "1", "1"])
        #expect(events.map(\.hasOwnID) == [true, false, false], "an id with NUL is ignored")
    }

    /// Fields split at the colon's code point: a combining mark after it is the value's.
    @Test func fieldsSplitAtTheColonCodePoint() {
        var parser = ServerSentEventParser()
        #expect(parser.feed(Array("data:\u{301}x\n\n".utf8)).map(\.data) == ["\u{301}x"])
        #expect(parser.feed(Array("data: \u{301}y\n\n".utf8)).map(\.data) == ["\u{301}y"])
    }
}

struct HostileTreeTests {
    func event(_ type: String, _ data: String) throws -> NavigationEvent {
        try #require(try NavigationEvent(type: type, data: Data(data.utf8)))
    }

    /// Presentations nest only so deep: the tree is walked by recursion.
    @Test func presentationsNestOnlySoDeep() throws {
        var tree: NavigationNode? = NavigationNode(id: "root", feature: "app")
        var parent = "root"
        var depth = 1
        while depth <= NavigationTree.maxDepth + 5 {
            let present = try event("present", #"{"id":"p\#(depth)","parent":"\#(parent)","slot":"destination","style":"sheet","feature":"f","state":{},"stacks":[]}"#)
            do { try NavigationTree.apply(present, to: &tree) } catch { break }
            parent = "p\(depth)"
            depth += 1
        }
        #expect(depth == NavigationTree.maxDepth, "the root and \(NavigationTree.maxDepth - 1) presentations fit, no more")
        #expect(tree?.find("p\(NavigationTree.maxDepth - 1)") != nil)
    }

    /// A stack element pushed below the deepest feature is refused too.
    @Test func stackElementsNestOnlySoDeep() throws {
        var node = NavigationNode(id: "deep", feature: "f", stacks: [NavigationStack(id: "s-deep", slot: "path")])
        for level in stride(from: NavigationTree.maxDepth - 1, through: 1, by: -1) {
            node = NavigationNode(id: "n\(level)", feature: "f", slot: "destination", style: .sheet, presentations: [node])
        }
        var tree: NavigationNode? = node
        #expect(throws: MirrorError.self) {
            try NavigationTree.apply(try event("push", #"{"stack":"s-deep","id":"e1","index":0,"feature":"f","state":{},"stacks":[]}"#), to: &tree)
        }
    }

    /// A stack id already on screen is refused, in a presentation, a push or a snapshot: `pop`
    /// and `push` name a stack by its id alone.
    @Test func aStackIdOnScreenIsNotTakenAgain() throws {
        var tree: NavigationNode? = NavigationNode(id: "root", feature: "app", stacks: [NavigationStack(id: "s1", slot: "path")])
        #expect(throws: MirrorError.self) {
            try NavigationTree.apply(try event("present", #"{"id":"p1","parent":"root","slot":"destination","style":"sheet","feature":"f","state":{},"stacks":[{"id":"s1","slot":"path"}]}"#), to: &tree)
        }
        #expect(throws: MirrorError.self) {
            try NavigationTree.apply(try event("push", #"{"stack":"s1","id":"e1","index":0,"feature":"f","state":{},"stacks":[{"id":"s2","slot":"a"},{"id":"s2","slot":"b"}]}"#), to: &tree)
        }
        #expect(throws: MirrorError.self) {
            try NavigationTree.apply(try event("snapshot", #"{"version":1,"navigation":{"id":"root","feature":"app","state":{},"presentations":[{"id":"p1","feature":"f","slot":"d","style":"sheet","state":{},"presentations":[],"stacks":[{"id":"s1","slot":"path","elements":[]}]}],"stacks":[{"id":"s1","slot":"path","elements":[]}]}}"#), to: &tree)
        }
        #expect(tree == NavigationNode(id: "root", feature: "app", stacks: [NavigationStack(id: "s1", slot: "path")]))
    }
}

/// The mirror against a scripted impostor of navd on loopback.
@MainActor @Suite(.serialized) struct HostileServerTests {
    nonisolated static let snapshot = #"{"version":1,"navigation":{"id":"root","feature":"app","state":{},"presentations":[],"stacks":[{"id":"s1","slot":"path","elements":[]}]}}"#
    nonisolated static let push = #"{"stack":"s1","id":"e1","index":0,"feature":"counter","state":{},"stacks":[]}"#
    nonisolated static let present = #"{"id":"p3","parent":"root","slot":"destination","style":"sheet","feature":"f","state":{},"stacks":[]}"#
    nonisolated static let fastRetry = NavigationMirror.RetryPolicy(initial: .milliseconds(50), maximum: .milliseconds(200))

    /// An event that only inherited the last id is applied, not skipped as a repeat of it.
    @Test func anEventWithoutItsOwnIdIsApplied() async throws {
        let navd = try ScriptedNavd { _ in
            "retry: 100\n\nid: 1\nevent: snapshot\ndata: \(Self.snapshot)\n\nevent: push\ndata: \(Self.push)\n\n"
        }
        defer { navd.stop() }
        let mirror = NavigationMirror(session: navd.client.session(id: "s", token: "t"), retry: Self.fastRetry)
        mirror.start()
        defer { mirror.stop() }
        try await until("the push", seconds: 30) { mirror.tree?.stacks.first?.elements.map(\.id) == ["e1"] }
        #expect(mirror.lastEventID == 1)
    }

    /// An event after an oversized one is never applied, even when it arrived with it.
    @Test func nothingAfterAnOversizedEventIsApplied() async throws {
        let big = #"{"version":2,"navigation":{"id":"root","feature":"app","state":{"pad":""# + String(repeating: "x", count: 4096) + #""},"presentations":[],"stacks":[]}}"#
        let navd = try ScriptedNavd { _ in
            "retry: 100\n\nid: 1\nevent: snapshot\ndata: \(Self.snapshot)\n\nid: 2\nevent: snapshot\ndata: \(big)\n\nid: 3\nevent: present\ndata: \(Self.present)\n\n"
        }
        defer { navd.stop() }
        let mirror = NavigationMirror(session: navd.client.session(id: "s", token: "t"), maxEventBytes: 1024)
        var applied: [Int?] = []
        mirror.onEvent = { id, _ in applied.append(id) }
        mirror.start()
        try await until("the mirror to end") { mirror.connection == .ended }
        #expect(mirror.endReason == "eventTooLarge")
        #expect(applied == [1])
    }

    /// A server the mirror keeps falling out of step with (a snapshot, then an event that does
    /// not fit it) is retried with a growing back-off, not every `initial`.
    @Test func aMirrorThatKeepsFallingOutOfStepBacksOff() async throws {
        let navd = try ScriptedNavd(hold: 10) { _ in
            "retry: 0\n\nid: 10\nevent: snapshot\ndata: \(Self.snapshot)\n\nid: 11\nevent: pop\ndata: {\"stack\":\"s1\",\"ids\":[\"e9\"],\"origin\":\"server\"}\n\n"
        }
        defer { navd.stop() }
        let mirror = NavigationMirror(session: navd.client.session(id: "s", token: "t"),
                                      retry: .init(initial: .milliseconds(50), maximum: .seconds(5)))
        mirror.start()
        try await Task.sleep(for: .seconds(2))
        let inTwoSeconds = navd.streamsOpened
        // It does try again (on a busy machine the second stream may come after the 2 s).
        try await until("a second stream") { navd.streamsOpened >= 2 }
        mirror.stop()
        // Doubling from 50 ms (±25%): about five streams in 2 s. Without the back-off, one every 50 ms.
        #expect(inTwoSeconds <= 8, "\(inTwoSeconds) streams in 2 s")
    }

    /// A refusal whose body never ends does not hold the mirror: it is read as far as it names
    /// the error, and the mirror tries again.
    @Test func aRefusalWhoseBodyNeverEndsDoesNotHoldTheMirror() async throws {
        let navd = try ScriptedNavd(head: "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
                                    hold: 8, drip: true) { _ in #"{"error":{"code":"over_capacity","message":"busy"}}"# }
        defer { navd.stop() }
        let mirror = NavigationMirror(session: navd.client.session(id: "s", token: "t"), retry: Self.fastRetry)
        mirror.start()
        defer { mirror.stop() }
        try await until("a second attempt", seconds: 4) { navd.streamsOpened >= 2 }
        #expect(mirror.connection != .ended)
    }

    /// A 200 that is not an event stream (a captive portal's page) is not read as one.
    @Test func aPageThatIsNotAnEventStreamIsRefused() async throws {
        let navd = try ScriptedNavd(head: "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: close\r\n\r\n", hold: 5) { _ in
            "id: 1\nevent: snapshot\ndata: \(Self.snapshot)\n\n"
        }
        defer { navd.stop() }
        let mirror = NavigationMirror(session: navd.client.session(id: "s", token: "t"), retry: Self.fastRetry)
        mirror.start()
        defer { mirror.stop() }
        try await until("a second attempt", seconds: 4) { navd.streamsOpened >= 2 }
        #expect(mirror.tree == nil && mirror.connection != .open)
    }

    /// Events a busy consumer has not read hold at most `maxEventBytes`: past that the stream
    /// ends, and the mirror resumes from what it applied.
    @Test func aFloodWhileTheMainActorIsBusyEndsTheStream() async throws {
        // 4 MiB arrive while the main actor is busy, 1 MiB may wait.
        let event = "event: ping\ndata: " + String(repeating: "x", count: 64 << 10) + "\n\n"
        try await floodWhileTheMainActorIsBusy(event, maxEventBytes: 1 << 20, hold: 10, reopenedWithin: 5)
    }

    /// The client's URLSession configuration (here a header an API gateway wants) reaches the
    /// event stream as it reaches every other request.
    @Test func theStreamIsOpenedWithTheClientsConfiguration() async throws {
        let navd = try ScriptedNavd(hold: 1) { _ in "" }
        defer { navd.stop() }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.httpAdditionalHeaders = ["X-Gateway-Key": "k1"]
        let mirror = NavigationMirror(session: NavdClient(baseURL: navd.baseURL, configuration: configuration).session(id: "s", token: "t"),
                                      retry: Self.fastRetry)
        mirror.start()
        defer { mirror.stop() }
        try await until("the stream to be opened") { navd.streamsOpened >= 1 }
        #expect(navd.streamHeads.first?.lowercased().contains("x-gateway-key: k1\r\n") == true, "\(navd.streamHeads)")
    }

    /// Empty events count too: a flood of `data:` and a blank line, seven bytes each, fills the
    /// same bound by what each event holds in memory, and ends the stream.
    @Test func aFloodOfEmptyEventsWhileTheMainActorIsBusyEndsTheStream() async throws {
        // 64,000 events arrive while the main actor is busy, about 2,000 may wait.
        try await floodWhileTheMainActorIsBusy(String(repeating: "data:\n\n", count: 1_000), maxEventBytes: 256 << 10,
                                               hold: 20, reopenedWithin: 10)
    }

    /// Sends `piece` 64 times on a stream held open `hold` seconds (longer than `reopenedWithin`,
    /// so only the client can end it in time) while the main actor sleeps 1.5 s, as in a long
    /// layout; the mirror must drop the stream and open it again.
    func floodWhileTheMainActorIsBusy(_ piece: String, maxEventBytes: Int, hold: TimeInterval,
                                      reopenedWithin seconds: Int) async throws {
        let navd = try ScriptedNavd(repeats: 64, hold: hold) { _ in piece }
        defer { navd.stop() }
        let mirror = NavigationMirror(session: navd.client.session(id: "s", token: "t"), retry: Self.fastRetry,
                                      maxEventBytes: maxEventBytes)
        mirror.start()
        defer { mirror.stop() }
        try await until("open") { mirror.connection == .open }
        usleep(1_500_000)
        try await until("the stream to be opened again", seconds: seconds) { navd.streamsOpened >= 2 }
    }
}

/// A navd impostor on a loopback port: `POST …/stream-tickets` gets a ticket; a path `answer`
/// gives a JSON body for gets it with 200; the n-th `GET …/events` (from 0) gets `head`, then
/// `body(n)` `repeats` times, and the connection stays open `hold` seconds (a space every 100 ms
/// with `drip`).
final class ScriptedNavd: Sendable {
    let port: Int
    private let listener: Int32
    private let opened = Mutex(0)
    private let heads = Mutex<[String]>([])
    var streamsOpened: Int { opened.withLock { $0 } }
    /// The heads of the event-stream requests, in order.
    var streamHeads: [String] { heads.withLock { $0 } }
    var baseURL: URL { URL(string: "http://127.0.0.1:\(port)")! }
    var client: NavdClient { NavdClient(baseURL: baseURL) }

    init(head: String = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
         repeats: Int = 1, hold: TimeInterval = 3, drip: Bool = false,
         answer: @escaping @Sendable (String) -> String? = { _ in nil },
         body: @escaping @Sendable (Int) -> String) throws {
        (listener, port) = try Loopback.listen()
        let listener = self.listener
        Thread { [self] in
            Loopback.serveEach(listener) { connection in
                let request = Loopback.readRequestHead(connection)
                let path = Loopback.path(ofHead: request)
                if path.hasSuffix("/stream-tickets") {
                    let json = #"{"ticket":"t","expiresIn":60}"#
                    Loopback.send(connection, "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\nConnection: close\r\n\r\n\(json)")
                    return
                }
                if let json = answer(path) {
                    Loopback.send(connection, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\nConnection: close\r\n\r\n\(json)")
                    return
                }
                let number = self.opened.withLock { count in
                    count += 1
                    return count - 1
                }
                self.heads.withLock { $0.append(request) }
                guard Loopback.send(connection, head) else { return }
                let piece = body(number)
                for _ in 0..<repeats { guard Loopback.send(connection, piece) else { return } }
                let deadline = Date().addingTimeInterval(hold)
                while Date() < deadline {
                    usleep(100_000)
                    if drip, !Loopback.send(connection, " ") { return }
                }
            }
        }.start()
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}

/// An answer is read only up to `maxResponseBytes`: past that the client throws and hangs up,
/// so a server that never stops sending holds neither its memory nor its request.
struct HostileAnswerTests {
    static let created = #"{"id":"s","token":"t","version":0,"navigation":{"id":"root","feature":"counter","state":{},"stacks":[]}}"#

    @Test func anEndlessAnswerIsCutOffAtTheLimit() async throws {
        let server = try EndlessAnswer(head: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
        defer { server.stop() }
        let client = NavdClient(baseURL: server.url, maxResponseBytes: 256 << 10)
        await #expect { _ = try await client.createSession(feature: "counter") } throws: { error in
            guard case .invalidResponse(let message)? = error as? NavdError else { return false }
            return message.contains("\(256 << 10) bytes")
        }
        // What the client keeps stops at the limit; what URLSession reads on before the cancel
        // lands (Foundation on Linux delivers bytes to a delegate on a queue of its own) is
        // dropped as it comes, and the connection closes soon after.
        try await untilTrue("the server to see the client hang up") { server.peerHungUp }
    }

    /// Refused on its head: no byte of the body is waited for.
    @Test func anAnswerLongerThanTheLimitByItsLengthIsNotRead() async throws {
        let server = try EndlessAnswer(head: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1099511627776\r\n\r\n",
                                       endless: false)
        defer { server.stop() }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 5
        let client = NavdClient(baseURL: server.url, configuration: configuration, maxResponseBytes: 1 << 20)
        await #expect { _ = try await client.createSession(feature: "counter") } throws: { error in
            guard case .invalidResponse? = error as? NavdError else { return false }
            return true
        }
        try await untilTrue("the server to see the client hang up") { server.peerHungUp }
    }

    @Test func anAnswerOfExactlyTheLimitIsRead() async throws {
        let body = Self.created
        for (limit, fits) in [(body.utf8.count, true), (body.utf8.count - 1, false)] {
            let server = try EndlessAnswer(head: "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: \(body.utf8.count)\r\n\r\n" + body,
                                           endless: false)
            defer { server.stop() }
            let client = NavdClient(baseURL: server.url, maxResponseBytes: limit)
            var answer = "no error"
            do { _ = try await client.createSession(feature: "counter") } catch { answer = error.description }
            #expect((answer == "no error") == fits, "limit \(limit): \(answer)")
        }
    }

    /// A server that sends its answer a byte at a time, each well within the bound on silence,
    /// would hold a request for as long as it likes: the whole answer has `requestTimeout`.
    @Test func anAnswerThatTricklesIsCutOffAtTheRequestTimeout() async throws {
        let server = try EndlessAnswer(head: "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n",
                                       piece: " ", pause: 100_000, upTo: 100)
        defer { server.stop() }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 5
        let client = NavdClient(baseURL: server.url, configuration: configuration, requestTimeout: 1)
        await #expect { _ = try await client.createSession(feature: "counter") } throws: { error in
            guard case .transport(let message)? = error as? NavdError else { return false }
            return message == "no whole answer within 1 s"
        }
        try await untilTrue("the server to see the client hang up") { server.peerHungUp }
    }

    /// A `wait` gets its own bound on top of `requestTimeout`: navd may hold its answer back that long.
    @Test func aWaitHasItsBoundOnTopOfTheRequestTimeout() async throws {
        let answer = #"{"version":1,"events":[]}"#
        let server = try EndlessAnswer(head: "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: \(answer.utf8.count)\r\n\r\n" + answer,
                                       endless: false, delay: 1_500_000)
        defer { server.stop() }
        var session = NavdClient(baseURL: server.url, requestTimeout: 1).session(id: "s", token: "t")
        session.waitTimeout = .seconds(2)
        #expect(try await session.perform("incrementButtonTapped", wait: true).version == 1)
        await #expect { _ = try await session.perform("incrementButtonTapped") } throws: { error in
            "\(error)" == "transport: no whole answer within 1 s"
        }
    }

    func untilTrue(_ what: String, _ condition: () -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw NavdError.transport("timed out waiting for \(what)") }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}

/// A server that answers every request with `head`, `delay` µs after it came, and then, when
/// `endless`, `piece` every `pause` µs (by default 16 KiB of zeros a millisecond) for as long
/// as the client reads them, up to `upTo` bytes.
final class EndlessAnswer: Sendable {
    let url: URL
    private let listener: Int32
    private let sent = Atomic<Int>(0)
    private let hungUp = Atomic<Bool>(false)
    var peerHungUp: Bool { hungUp.load(ordering: .relaxed) }

    init(head: String, endless: Bool = true, delay: useconds_t = 0, piece: String = String(repeating: "0", count: 16 << 10),
         pause: useconds_t = 1000, upTo limit: Int = 64 << 20) throws {
        let (listener, port) = try Loopback.listen()
        self.listener = listener
        url = URL(string: "http://127.0.0.1:\(port)")!
        Thread { [self] in
            Loopback.serveEach(listener) { connection in
                _ = Loopback.readRequestPath(connection)
                if delay > 0 { usleep(delay) }
                guard Loopback.send(connection, head) else { return }
                guard endless else {
                    // Closed only once the client has read the answer and hung up: closing
                    // with its body unread would reset the connection under the answer.
                    var byte: UInt8 = 0
                    while recv(connection, &byte, 1, 0) > 0 {}
                    self.hungUp.store(true, ordering: .relaxed)
                    return
                }
                while Loopback.send(connection, piece) {
                    usleep(pause)  // 16 MB/s by default: a flood, yet one that leaves the client's cancel room to land
                    // Bounded (64 MiB, 4 s, by default): a client that never hangs up fails the test, not the machine.
                    guard self.sent.add(piece.utf8.count, ordering: .relaxed).newValue < limit else { return }
                }
                self.hungUp.store(true, ordering: .relaxed)
            }
        }.start()
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}
