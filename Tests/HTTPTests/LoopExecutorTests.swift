#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import HTTP
import Synchronization
import Testing

/// Work placed on a loop's executor runs on that loop's thread while the server runs, one piece
/// at a time with its connections, and on a queue of its own before the start and after the stop,
/// so nothing placed there is ever lost.
@Suite struct LoopExecutorTests {
    /// An actor that lives on a loop, as a session does.
    actor Counter {
        let executor: LoopExecutor
        var count = 0
        init(on executor: LoopExecutor) { self.executor = executor }
        nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }
        func increment() -> Int {
            count += 1
            return count
        }
    }

    /// Answers with whether the request arrived on the executor it reports, and uses an actor
    /// living there in place, without a hop.
    final class OnLoop: HTTPHandler {
        let counters = Mutex<[ObjectIdentifier: Counter]>([:])

        func handle(_ request: HTTPRequest, responder: HTTPResponder) {
            let executor = responder.executor
            let counter = counters.withLock { $0[ObjectIdentifier(executor), default: Counter(on: executor)] }
            counters.withLock { $0[ObjectIdentifier(executor)] = counter }
            let count = counter.assumeIsolated { $0.increment() }
            responder.respond(HTTPResponse(status: 200, body: Array("\(executor.isCurrent) \(count)".utf8)))
        }

        func response(to refusal: HTTPRefusal) -> HTTPResponse { HTTPResponse(status: refusal.error.status) }
    }

    static func run(on executor: LoopExecutor, _ work: @escaping @Sendable () -> Bool) async -> Bool {
        await withCheckedContinuation { done in executor.execute { done.resume(returning: work()) } }
    }

    @Test func beforeTheStartWorkRunsOnTheExecutorsOwnQueue() async {
        let server = HTTPServer(configuration: .init(port: 0, loopCount: 2), handler: OnLoop())
        let executor = server.executors[0]
        #expect(!executor.isCurrent)
        #expect(await Self.run(on: executor) { executor.isCurrent && !server.executors[1].isCurrent })
        let counter = Counter(on: executor)
        #expect(await counter.increment() == 1)
    }

    @Test func whileTheServerRunsARequestUsesAnActorOnItsOwnLoopInPlace() async throws {
        let server = HTTPServer(configuration: .init(port: 0, loopCount: 2), handler: OnLoop())
        let early = Counter(on: server.executors[1])
        #expect(await early.increment() == 1)
        try server.start()
        defer { server.finishShutdown(deadline: .now + .seconds(1)) }
        for _ in 0..<4 {
            let client = try TestClient(port: server.port)
            for expected in 1...3 {
                try client.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                let words = try client.readResponse().bodyText.split(separator: " ")
                #expect(words.first == "true")
                // The same connection, the same loop, the same actor: its count goes up by one.
                #expect(Int(words.last ?? "") ?? 0 >= expected)
            }
        }
        // An actor placed on a loop before the start now runs there, its state intact.
        #expect(await early.increment() == 2)
        #expect(await Self.run(on: server.executors[1]) { server.executors[1].isCurrent && !server.executors[0].isCurrent })
    }

    @Test func tasksPreferringALoopRunThere() async throws {
        let server = HTTPServer(configuration: .init(port: 0, loopCount: 1), handler: OnLoop())
        try server.start()
        defer { server.finishShutdown(deadline: .now + .seconds(1)) }
        let executor = server.executors[0]
        let onLoop = await Task(executorPreference: executor) {
            try? await Task.sleep(for: .milliseconds(5))
            return executor.isCurrent
        }.value
        #expect(onLoop)
    }

    @Test func afterTheStopWorkStillRunsAndActorsStayUsable() async throws {
        let server = HTTPServer(configuration: .init(port: 0, loopCount: 1), handler: OnLoop())
        try server.start()
        let executor = server.executors[0]
        let counter = Counter(on: executor)
        #expect(await counter.increment() == 1)
        server.finishShutdown(deadline: .now + .seconds(1))
        #expect(await Self.run(on: executor) { executor.isCurrent })
        #expect(await counter.increment() == 2)
    }

    /// Requests handled in place cannot hold a stopping loop up either: once it stops, ready
    /// connections are no longer served, only closed.
    @Test func aLoopStopsPromptlyWithRequestsStillReady() async throws {
        final class Slow: HTTPHandler {
            let started = Atomic<Int>(0)
            func handle(_ request: HTTPRequest, responder: HTTPResponder) {
                started.add(1, ordering: .relaxed)
                usleep(50_000)
                responder.respond(HTTPResponse(status: 200))
            }
            func response(to refusal: HTTPRefusal) -> HTTPResponse { HTTPResponse(status: refusal.error.status) }
        }
        let handler = Slow()
        let server = HTTPServer(configuration: .init(port: 0, loopCount: 1), handler: handler)
        try server.start()
        var clients: [TestClient] = []
        for _ in 0..<40 {
            let client = try TestClient(port: server.port)
            try client.send("GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            clients.append(client)
        }
        while handler.started.load(ordering: .relaxed) == 0 { usleep(1_000) }
        let stopping = ContinuousClock.now
        server.finishShutdown(deadline: .now + .milliseconds(100))
        // The deadline, then at most the request in progress; serving every ready one took 0.6
        // to 1.4 s here (40 requests of 50 ms would be 2 s).
        #expect(ContinuousClock.now - stopping < .milliseconds(400))
        #expect(handler.started.load(ordering: .relaxed) < 10)
        withExtendedLifetime(clients) {}
    }

    /// A long queue of work on a loop cannot hold its shutdown up: what is left moves to the
    /// executor's own queue, still one piece at a time.
    @Test func aLoopStopsPromptlyWithWorkStillQueued() async throws {
        let server = HTTPServer(configuration: .init(port: 0, loopCount: 1), handler: OnLoop())
        try server.start()
        let executor = server.executors[0]
        let ran = Atomic<Int>(0)
        let overlapping = Atomic<Bool>(false)
        let busy = Atomic<Bool>(false)
        for _ in 0..<200 {
            executor.execute {
                if busy.exchange(true, ordering: .acquiringAndReleasing) { overlapping.store(true, ordering: .relaxed) }
                usleep(5_000)
                busy.store(false, ordering: .releasing)
                ran.add(1, ordering: .relaxed)
            }
        }
        let stopping = ContinuousClock.now
        server.beginShutdown()
        server.finishShutdown(deadline: .now + .milliseconds(100))
        #expect(ContinuousClock.now - stopping < .milliseconds(800))
        #expect(ran.load(ordering: .relaxed) < 200)
        // Everything still runs, none of it at the same time as another piece.
        #expect(await Self.run(on: executor) { true })
        #expect(ran.load(ordering: .relaxed) == 200)
        let overlapped = overlapping.load(ordering: .relaxed)
        #expect(!overlapped)
    }

    /// What a thread outside the loops hands over while gathering (a store's writer answering
    /// a commit) reaches no loop until the gathering ends, then all of it runs, each piece on
    /// its own loop and in the order it was handed over there.
    @Test func gatheredWorkWaitsForTheGatheringToEndThenRunsInOrder() async throws {
        let server = HTTPServer(configuration: .init(port: 0, loopCount: 2), handler: OnLoop())
        try server.start()
        defer { server.finishShutdown(deadline: .now + .seconds(1)) }
        let ran = Mutex<[(loop: Int, piece: Int, inPlace: Bool)]>([])
        let ranDuringTheGathering = await withCheckedContinuation { (done: CheckedContinuation<Int, Never>) in
            DispatchQueue(label: "writer").async {
                let seen = LoopExecutor.gathering { () -> Int in
                    for piece in 0..<40 {
                        // Runs of ten for one loop, then ten for the other.
                        let loop = piece / 10 % 2
                        let executor = server.executors[loop]
                        executor.execute { ran.withLock { $0.append((loop, piece, executor.isCurrent)) } }
                        // Nested gathering adds to the outer one.
                        if piece == 20 { LoopExecutor.gathering { executor.execute { ran.withLock { $0.append((loop, 1000, executor.isCurrent)) } } } }
                    }
                    usleep(50_000)
                    return ran.withLock { $0.count }
                }
                done.resume(returning: seen)
            }
        }
        #expect(ranDuringTheGathering == 0)
        for executor in server.executors { #expect(await Self.run(on: executor) { true }) }
        let pieces = ran.withLock { $0 }
        #expect(pieces.count == 41)
        #expect(pieces.allSatisfy { $0.inPlace })
        for loop in 0..<2 {
            let expected = (0..<40).filter { $0 / 10 % 2 == loop }.flatMap { $0 == 20 ? [20, 1000] : [$0] }
            #expect(pieces.filter { $0.loop == loop }.map(\.piece) == expected)
        }
    }

    /// A loop can stop while work for it is gathered (its stop is never held back), and its
    /// executor's work still runs in the order it was handed over: what was gathered before the
    /// stop does not come after what came later.
    @Test(.timeLimit(.minutes(1))) func workGatheredWhileItsLoopStopsKeepsItsOrder() async throws {
        let server = HTTPServer(configuration: .init(port: 0, loopCount: 1), handler: OnLoop())
        try server.start()
        let executor = server.executors[0]
        let ran = Mutex<[String]>([])
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            DispatchQueue(label: "writer").async {
                LoopExecutor.gathering {
                    executor.execute { ran.withLock { $0.append("first") } }
                    server.beginShutdown()
                    server.finishShutdown(deadline: .now + .seconds(1))
                    executor.execute { ran.withLock { $0.append("second") } }
                }
                done.resume()
            }
        }
        #expect(await Self.run(on: executor) { true })
        #expect(ran.withLock { $0 } == ["first", "second"])
    }
}
