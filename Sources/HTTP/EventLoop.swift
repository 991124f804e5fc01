#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// One event-loop thread with its own selector (`IOSelector`: epoll or Dispatch). It owns its
/// connections outright: their state is touched only on this thread. Other threads talk to it
/// through `post`, which queues a message and wakes the loop through the selector, once per batch.
///
/// Cross-thread members: `inbox`, `threadID`, `settings`, `shared`. Everything else is
/// confined to the loop thread (hence `@unchecked Sendable`).
final class EventLoop: @unchecked Sendable {
    static let wakeToken: UInt64 = 0
    static let listenToken: UInt64 = 1

    private struct Inbox {
        var messages: [LoopMessage] = []
        /// The selector has been woken and the loop has not drained the inbox since.
        var wakePending = false
        /// The loop has stopped; messages are dropped and the selector is closed.
        var closed = false
    }

    let shared: ServerShared
    /// Runs actors' jobs, tasks and closures placed on this loop.
    let executor: LoopExecutor
    var settings: LoopSettings { shared.settings }
    private let inbox = Mutex(Inbox())
    /// Posters between taking the wake-up and making it; the selector outlives every one.
    private let wakersInFlight = Atomic<Int>(0)
    /// Set by mail from outside the loops and cleared by the drain, so a busy loop can look
    /// between two connections: a store's notice (the answers of a commit) then waits for one
    /// connection's turn, not for every connection the selector reported. Mail from another
    /// loop waits for the wake-up: that loop posts a hop for each request it cannot serve in
    /// place, and taking each between connections had both loops chasing each other's hops
    /// (p99 at 32 connections 7.4 ms instead of 2.2 without a store, measured).
    private let hasMail = Atomic<Bool>(false)
    private let threadID = Atomic<UInt>(0)

    // Loop-confined state.
    let selector: any IOSelector
    var peers: [EventLoop] = []
    var connections: [Connection?] = []
    /// What this loop last added to `shared.bufferedOutput`.
    var countedOutput = 0
    /// `shared.bodyRefusals` as this loop's last sweep saw it.
    var seenBodyRefusals = 0
    /// Sweeps left in which bodies count as pressed since the last refusal for their bound.
    var bodyPressureSweeps = 0
    var localMessages: [LoopMessage] = []
    private var spareMessages: [LoopMessage] = []
    var dirty: [Connection] = []
    private var spareDirty: [Connection] = []
    var now: Int64
    let readBuffer: UnsafeMutableRawBufferPointer
    var writeBuffer: [UInt8] = []
    var date = HTTPDate()
    var chunkScratch: [[UInt8]] = []
    let iovecs: UnsafeMutablePointer<iovec>
    static let maxIOVecs = 16
    var running = true
    var shuttingDown = false
    var listening = true
    /// While accept fails for lack of descriptors, the listener rests until then.
    var listenPausedUntil: Int64 = 0
    private var nextGeneration: UInt32 = 0
    private var nextSweep: Int64

    /// - Parameter acceptsConnections: whether this loop watches the listener; the loop that
    ///   accepts deals connections out to every loop.
    init(shared: ServerShared, executor: LoopExecutor, acceptsConnections: Bool) throws(HTTPServerError) {
        self.shared = shared
        self.executor = executor
        self.selector = try shared.settings.backend.makeSelector(wakeToken: Self.wakeToken)
        self.now = MonotonicClock.now()
        self.nextSweep = now + shared.settings.sweepInterval
        self.readBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        self.iovecs = UnsafeMutablePointer<iovec>.allocate(capacity: Self.maxIOVecs)
        writeBuffer.reserveCapacity(64 * 1024)
        listening = acceptsConnections
        if acceptsConnections { selector.registerListener(shared.listenFD, token: Self.listenToken) }
    }

    // MARK: Messages

    var isCurrentThread: Bool {
        threadID.load(ordering: .relaxed) == currentThreadID()
    }

    /// Hands a message to the loop from any thread. On the loop's own thread it is queued
    /// locally and handled before the loop next waits (never re-entrantly).
    func post(_ message: LoopMessage) {
        post(contentsOf: CollectionOfOne(message))
    }

    /// Hands several messages over at once, in order: from another thread under one lock, with
    /// at most one wake-up.
    func post(contentsOf messages: some Collection<LoopMessage>) {
        if isCurrentThread {
            localMessages.append(contentsOf: messages)
            return
        }
        let (dropped, wakes) = inbox.withLock { inbox -> ([LoopMessage], Bool) in
            guard !inbox.closed else {
                // Passed on under the lock, so it runs after what the loop left behind.
                for case .work(let work) in messages { executor.runOnSpare(work) }
                return (Array(messages), false)
            }
            inbox.messages.append(contentsOf: messages)
            if !LoopThreadMark.isCurrent { hasMail.store(true, ordering: .releasing) }
            guard !inbox.wakePending else { return ([], false) }
            inbox.wakePending = true
            // Counted under the lock, so a teardown that closes the inbox after this waits for it.
            wakersInFlight.add(1, ordering: .acquiring)
            return ([], true)
        }
        if wakes {
            // Outside the lock: a system call that can switch to the loop's thread must not keep
            // every other poster (and the loop's own drain) waiting on the lock.
            selector.wakeUp()
            wakersInFlight.subtract(1, ordering: .releasing)
        }
        for message in dropped { discard(message) }
    }

    /// What a stopped loop does with a message it will never handle: the loop is gone, and
    /// nobody else will close the connection it was handed or finish the stream.
    private func discard(_ message: LoopMessage) {
        switch message {
        case .adopt(let fd, _):
            closeDescriptor(fd)
            shared.openConnections.subtract(1, ordering: .relaxed)
        case .startStream(_, _, let stream, _):
            stream.finish(.shutdown)
        case .refuseUnfinished:
            // Nothing of this loop is left to refuse; the stop must not wait for it.
            shared.loopsRefusingUnfinished.subtract(1, ordering: .releasing)
        default:
            break
        }
    }

    private func drainInbox() {
        selector.acknowledgeWakeUp()
        inbox.withLock { inbox in
            swap(&inbox.messages, &spareMessages)
            inbox.wakePending = false
            hasMail.store(false, ordering: .relaxed)
        }
        for message in spareMessages { handle(message) }
        spareMessages.removeAll(keepingCapacity: spareMessages.capacity <= 1024)
    }

    private func handle(_ message: LoopMessage) {
        switch message {
        case .adopt(let fd, let peer):
            adopt(fd: fd, peer: peer)
        case .respond(let connection, let sequence, let response):
            deliver(response, to: connection, sequence: sequence)
        case .startStream(let connection, let sequence, let stream, let headers):
            deliver(stream, headers: headers, to: connection, sequence: sequence)
        case .streamActivity(let connection):
            if connection.state.stream != nil { flushStream(connection) }
        case .work(let work):
            guard !isHalting else {
                // Between two pieces of work: nothing of the executor runs here any more.
                executor.leaveLoop()
                return executor.runOnSpare(work)
            }
            executor.run(work)
        case .beginShutdown:
            beginShutdown()
        case .refuseUnfinished:
            refuseUnfinishedRequests()
        case .stop:
            stop()
        }
    }

    /// Set once the server stops: the loop only drains its inbox until `.stop` arrives.
    private var isHalting: Bool { shared.halting.load(ordering: .relaxed) }

    func markDirty(_ connection: Connection) {
        guard !connection.isDirty else { return }
        connection.isDirty = true
        dirty.append(connection)
    }

    /// Handles local messages and writes dirty connections until nothing is left to do, or the
    /// server halts: a write can start the next pipelined request, handled in place, and a
    /// stopping loop must reach its `.stop` instead.
    private func settle() {
        while !isHalting && (!localMessages.isEmpty || !dirty.isEmpty) {
            while !localMessages.isEmpty {
                swap(&localMessages, &spareMessages)
                for message in spareMessages { handle(message) }
                spareMessages.removeAll(keepingCapacity: true)
            }
            swap(&dirty, &spareDirty)
            for connection in spareDirty {
                connection.isDirty = false
                flush(connection)
            }
            spareDirty.removeAll(keepingCapacity: true)
        }
    }

    // MARK: Running

    func run() {
        threadID.store(currentThreadID(), ordering: .releasing)
        LoopThreadMark.markCurrent()
        executor.enterLoop()
        while running {
            let wait = max(0, min(nextSweep - now, 1_000_000_000))
            var ready = false
            selector.wait(timeoutNanoseconds: wait) { token, readiness in
                if !ready {
                    ready = true
                    now = MonotonicClock.now()
                }
                switch token {
                case Self.wakeToken: drainInbox()
                // Stopping: its `.stop` is on the way and closes every connection; serving more
                // (a request handled in place can be long) would only hold the stop up.
                case _ where isHalting: break
                case Self.listenToken: acceptConnections()
                default:
                    // Mail first: what was posted from outside the loops before this
                    // connection's bytes arrived (the notice that made an answer durable) takes
                    // effect before its request does.
                    if hasMail.load(ordering: .acquiring) { drainInbox() }
                    handle(readiness, token: token)
                }
            }
            if !ready { now = MonotonicClock.now() }
            settle()
            if now >= nextSweep && !isHalting {
                sweep()
                settle()
                nextSweep = now + settings.sweepInterval
            }
        }
        tearDown()
    }

    private func handle(_ readiness: Readiness, token: UInt64) {
        let fd = Int(UInt32(truncatingIfNeeded: token))
        guard fd < connections.count, let connection = connections[fd], connection.token == token else { return }
        if readiness.contains(.failed) && !connection.interest.contains(.readable) {
            close(connection, reason: .clientClosed)
            return
        }
        if readiness.contains(.readable) {
            readable(connection)
        }
        if readiness.contains(.writable) && !connection.state.isClosed {
            connection.madeWriteProgress(now)
            flush(connection)
        }
    }

    /// Registers a connection this loop now owns.
    func register(fd: Int32, peer: PeerAddress, isRefused: Bool = false) -> Connection {
        nextGeneration &+= 1
        if nextGeneration == 0 { nextGeneration = 1 }
        let token = UInt64(nextGeneration) << 32 | UInt64(UInt32(bitPattern: fd))
        let connection = Connection(fd: fd, token: token, peer: peer, isRefused: isRefused, now: now)
        let index = Int(fd)
        if index >= connections.count {
            connections.append(contentsOf: repeatElement(nil, count: max(index + 1, connections.count * 2) - connections.count))
        }
        connections[index] = connection
        connection.interest = .readable
        selector.register(fd, interest: connection.interest, token: token)
        return connection
    }

    /// Closes every connection, stops accepting and ends `run`.
    private func stop() {
        running = false
        stopListening()
        for index in connections.indices {
            if let connection = connections[index] { close(connection, reason: .shutdown) }
        }
    }

    /// Releases everything the loop holds; at the end of `run`, or for a loop never started.
    func tearDown() {
        var leftover: [LoopMessage] = []
        executor.detach {
            leftover = inbox.withLock { inbox -> [LoopMessage] in
                inbox.closed = true
                defer { inbox.messages = [] }
                for case .work(let work) in localMessages + inbox.messages { executor.runOnSpare(work) }
                return inbox.messages
            }
        }
        // No poster can start a wake-up now; one that started finishes before the descriptor
        // goes (and its number could be reused by someone else's file).
        while wakersInFlight.load(ordering: .acquiring) > 0 { sched_yield() }
        selector.close()
        for message in leftover + localMessages { discard(message) }
        localMessages = []
        connections = []
        dirty = []
        peers = []
        threadID.store(0, ordering: .releasing)
        readBuffer.deallocate()
        iovecs.deallocate()
    }

    func stopListening() {
        guard listening else { return }
        listening = false
        selector.deregister(shared.listenFD)
    }
}
