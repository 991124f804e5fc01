import Dispatch
import Synchronization
#if os(Linux)
import CNavdSystem
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The portable backend: Dispatch read and write sources report readiness, on a serial queue of
/// the loop's own, and the loop's thread waits for their reports. It runs wherever Dispatch does
/// (Linux, macOS); the connection logic above it is the same as with epoll.
///
/// A source that fired is suspended until the loop has dealt with it, and resumed at the loop's
/// next wait if the descriptor still wants that readiness: the loop sees level-triggered
/// readiness, as with epoll, without a source firing again and again meanwhile.
///
/// The loop's timeout is a `DispatchSourceTimer` on the same queue, so a wait ends on whichever
/// comes first, a source or the timer, through one path.
///
/// Dispatch forbids closing a descriptor a source still watches, so descriptors this selector
/// watches are closed by it (`closeWatched`), in the cancel handler of their last source.
///
/// Hang-ups are the selector's to report. libdispatch on Linux takes a descriptor out of its
/// epoll set at EPOLLHUP: each source fires once more and never again, resumed or not. A hang-up
/// is for good, so once a source saw one the selector reports the descriptor at every wait
/// itself, as epoll would. And a descriptor that waits for nothing has no source armed, so
/// those are polled, at most every `idlePollInterval`, for the hang-up or error that epoll
/// reports whatever a descriptor waits for.
final class DispatchSelector: IOSelector, @unchecked Sendable {
    /// One descriptor's sources. Created and changed on the loop's thread; `armed` is also read
    /// and written by the handlers, under `state`'s lock.
    private final class Watch: @unchecked Sendable {
        let fd: Int32
        var token: UInt64
        var interest: Interest
        var read: (any DispatchSourceRead)?
        var write: (any DispatchSourceWrite)?
        /// Whether each source is resumed (watching) rather than suspended.
        var readArmed = false
        var writeArmed = false
        /// Reported to the loop since its last wait: re-armed at the next one.
        var reported = false
        /// Under `state`'s lock: a source saw the descriptor hung up, and will not fire again.
        var hungUp = false
        /// Under `state`'s lock: a hang-up report is waiting in `State.ready`.
        var hangUpQueued = false

        init(fd: Int32, token: UInt64, interest: Interest) {
            self.fd = fd
            self.token = token
            self.interest = interest
        }
    }

    private struct State {
        var ready: [(Watch, Readiness)] = []
        var woken = false
        var timedOut = false

        /// Nothing has happened since the loop last looked, so whatever happens next signals it.
        var isQuiet: Bool { ready.isEmpty && !woken && !timedOut }
    }

    private let queue: DispatchQueue
    private let state = Mutex(State())
    private let signal = DispatchSemaphore(value: 0)
    /// Every source not yet cancelled-and-handled; `close` waits for it to empty.
    private let live = DispatchGroup()
    private let wakeToken: UInt64
    private let timer: any DispatchSourceTimer
    /// Loop-confined: when the timer is due to fire, nil when it is not pending.
    private var timerDeadline: DispatchTime?
    /// Loop-confined: descriptors by number, and the ones reported by the last wait.
    private var watches: [Int32: Watch] = [:]
    private var toRearm: [Watch] = []
    /// Loop-confined: the watches that wait for nothing, and when they are next polled.
    private var idleWatches: [Int32: Watch] = [:]
    private var nextIdlePoll: Int64 = 0
    static let idlePollInterval: Int64 = 100_000_000

    init(capacity: Int, wakeToken: UInt64) throws(HTTPServerError) {
        self.queue = DispatchQueue(label: "navd.loop.io")
        self.wakeToken = wakeToken
        self.timer = DispatchSource.makeTimerSource(queue: queue)
        timer.setEventHandler { [unowned self] in timerFired() }
        live.enter()
        timer.setCancelHandler { [live] in live.leave() }
        timer.activate()
    }

    func register(_ fd: Int32, interest: Interest, token: UInt64) {
        let watch = Watch(fd: fd, token: token, interest: interest)
        watches[fd] = watch
        apply(interest, to: watch)
        idleWatches[fd] = interest.isEmpty ? watch : nil
    }

    func reregister(_ fd: Int32, interest: Interest, token: UInt64) {
        guard let watch = watches[fd] else { return register(fd, interest: interest, token: token) }
        watch.token = token
        watch.interest = interest
        apply(interest, to: watch)
        idleWatches[fd] = interest.isEmpty ? watch : nil
    }

    /// Stops watching without closing: only the shared listener is given up this way. Returns
    /// once its sources are gone, since the listener may be closed next, and libdispatch on
    /// Linux keeps watching a descriptor's number for a source not yet cancelled: a socket
    /// opened later with that number would never be reported (swift-corelibs-libdispatch #833).
    func deregister(_ fd: Int32) {
        guard let watch = watches.removeValue(forKey: fd) else { return }
        idleWatches[fd] = nil
        let gone = DispatchSemaphore(value: 0)
        cancel(watch, thenClose: false) { gone.signal() }
        gone.wait()
    }

    func registerListener(_ fd: Int32, token: UInt64) {
        register(fd, interest: .readable, token: token)
    }

    func closeWatched(_ fd: Int32) {
        guard let watch = watches.removeValue(forKey: fd) else {
            _ = closeDescriptor(fd)
            return
        }
        idleWatches[fd] = nil
        cancel(watch, thenClose: true)
    }

    func wait(timeoutNanoseconds: Int64, _ ready: (_ token: UInt64, _ readiness: Readiness) -> Void) {
        for watch in toRearm where watches[watch.fd] === watch {
            watch.reported = false
            apply(watch.interest, to: watch)
        }
        toRearm.removeAll(keepingCapacity: true)
        var taken = takeReady()
        if taken.isQuiet && timeoutNanoseconds > 0 {
            armTimer(DispatchTime.now() + .nanoseconds(Int(clamping: timeoutNanoseconds)))
            // A signal can be left over from reports taken without waiting: wait on until there
            // is something to report or the timer has fired. Leftovers are not drained first:
            // each lets a busy loop look once more before it sleeps, which measured cheaper
            // than the wake-up it saves.
            while taken.isQuiet {
                signal.wait()
                taken = takeReady()
            }
        }
        if taken.timedOut { timerDeadline = nil }
        if taken.woken { ready(wakeToken, .readable) }
        if !idleWatches.isEmpty {
            let now = MonotonicClock.now()
            if now >= nextIdlePoll {
                nextIdlePoll = now + Self.idlePollInterval
                reportHangUpsOfIdleWatches(ready)
            }
        }
        for (watch, readiness) in taken.ready where watches[watch.fd] === watch {
            if !watch.reported {
                watch.reported = true
                toRearm.append(watch)
            }
            ready(watch.token, readiness)
        }
    }

    func wakeUp() {
        let first = state.withLock { state in
            defer { state.woken = true }
            return state.isQuiet
        }
        if first { signal.signal() }
    }

    /// The wake-up was taken with the readiness it came with.
    func acknowledgeWakeUp() {}

    func close() {
        timer.cancel()
        for watch in watches.values { cancel(watch, thenClose: false) }
        watches = [:]
        idleWatches = [:]
        toRearm = []
        live.wait()
    }

    /// Non-blocking and close-on-exec from the start where the system can (accept4 on Linux), so
    /// a process the host spawns meanwhile never inherits a connection; elsewhere set just after.
    static func accept(_ listenFD: Int32, _ address: UnsafeMutablePointer<sockaddr>, _ length: UnsafeMutablePointer<socklen_t>) -> Int32 {
        #if os(Linux)
        return navd_accept4_nonblocking(listenFD, address, length)
        #else
        let fd = Darwin.accept(listenFD, address, length)
        guard fd >= 0 else { return fd }
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0, fcntl(fd, F_SETFD, FD_CLOEXEC) == 0 else {
            let code = errno
            _ = closeDescriptor(fd)
            errno = code
            return -1
        }
        return fd
        #endif
    }

    // MARK: - Sources

    private func takeReady() -> State {
        state.withLock { state in
            defer { state = State() }
            for (watch, _) in state.ready { watch.hangUpQueued = false }
            return state
        }
    }

    /// Called on the queue when a source fires: suspends it and tells the loop. The descriptor
    /// is still open (closed only in a cancel handler, on this queue). A hang-up fires with no
    /// data; a read source's data is otherwise the bytes waiting, so the poll is rarely made.
    private func fired(_ watch: Watch, _ readiness: Readiness, data: UInt) {
        let hungUp = data == 0 && Self.isHungUp(watch.fd)
        let wake = state.withLock { state -> Bool in
            if hungUp { watch.hungUp = true }
            if readiness == .writable {
                guard watch.writeArmed, let write = watch.write else { return false }
                watch.writeArmed = false
                write.suspend()
            } else {
                guard watch.readArmed, let read = watch.read else { return false }
                watch.readArmed = false
                read.suspend()
            }
            let wasIdle = state.isQuiet
            state.ready.append((watch, watch.hungUp ? readiness.union(.failed) : readiness))
            return wasIdle
        }
        if wake { signal.signal() }
    }

    /// Schedules the timer for `deadline` unless it is already due by then. The loop's deadline
    /// is its next sweep, the same for many waits in a row, so the timer is rarely moved; firing
    /// a little early only costs a wait that finds nothing.
    private func armTimer(_ deadline: DispatchTime) {
        if let due = timerDeadline, due.uptimeNanoseconds <= deadline.uptimeNanoseconds + 1_000_000 { return }
        timerDeadline = deadline
        timer.schedule(deadline: deadline, leeway: .milliseconds(1))
    }

    /// Called on the queue when the timer fires.
    private func timerFired() {
        let wake = state.withLock { state in
            defer { state.timedOut = true }
            return state.isQuiet
        }
        if wake { signal.signal() }
    }

    /// Resumes or suspends each source to match `interest`, creating what is missing.
    private func apply(_ interest: Interest, to watch: Watch) {
        let read = interest.contains(.readable) && watch.read == nil
            ? DispatchSource.makeReadSource(fileDescriptor: watch.fd, queue: queue) : nil
        let write = interest.contains(.writable) && watch.write == nil
            ? DispatchSource.makeWriteSource(fileDescriptor: watch.fd, queue: queue) : nil
        // Each handler holds its source until `cancel` replaces it with none.
        read?.setEventHandler { [unowned self, read] in fired(watch, .readable, data: read?.data ?? 0) }
        write?.setEventHandler { [unowned self, write] in fired(watch, .writable, data: write?.data ?? 0) }
        for _ in [read as (any DispatchSourceProtocol)?, write].compactMap({ $0 }) { live.enter() }
        state.withLock { state in
            if let read { watch.read = read }
            if let write { watch.write = write }
            if let read = watch.read, interest.contains(.readable) != watch.readArmed {
                watch.readArmed.toggle()
                if watch.readArmed { read.resume() } else { read.suspend() }
            }
            if let write = watch.write, interest.contains(.writable) != watch.writeArmed {
                watch.writeArmed.toggle()
                if watch.writeArmed { write.resume() } else { write.suspend() }
            }
            // Its sources will not fire again: reported from here, at the loop's next wait
            // (which takes it without waiting, so no signal is needed).
            if watch.hungUp && !watch.hangUpQueued {
                watch.hangUpQueued = true
                state.ready.append((watch, Self.hangUpReadiness(interest)))
            }
        }
    }

    /// What epoll reports for a hung-up descriptor that waits for `interest`.
    private static func hangUpReadiness(_ interest: Interest) -> Readiness {
        interest.contains(.writable) ? [.readable, .writable, .failed] : [.readable, .failed]
    }

    /// Whether `fd` is hung up, by poll(2) without waiting.
    private static func isHungUp(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: 0, revents: 0)
        return poll(&entry, 1, 0) == 1 && entry.revents & Int16(POLLHUP) != 0
    }

    /// Reports the descriptors that wait for nothing (no source armed) and are hung up or
    /// failed, found by one poll(2) of them all, before any is reported: the loop may close
    /// some as it is told.
    private func reportHangUpsOfIdleWatches(_ ready: (_ token: UInt64, _ readiness: Readiness) -> Void) {
        let idle = Array(idleWatches.values)
        var entries = idle.map { pollfd(fd: $0.fd, events: 0, revents: 0) }
        guard poll(&entries, nfds_t(entries.count), 0) > 0 else { return }
        let failed = zip(idle, entries).filter { $0.1.revents & Int16(POLLHUP | POLLERR) != 0 }.map(\.0)
        for watch in failed where idleWatches[watch.fd] === watch {
            ready(watch.token, [.readable, .failed])
        }
    }

    /// Cancels the descriptor's sources; the last cancel handler closes it if asked. A source
    /// must be resumed for its cancel handler to run, and must not fire after this.
    private func cancel(_ watch: Watch, thenClose: Bool, whenDone: @escaping @Sendable () -> Void = {}) {
        let sources: [any DispatchSourceProtocol] = [watch.read, watch.write].compactMap { $0 }
        guard !sources.isEmpty else {
            if thenClose { _ = closeDescriptor(watch.fd) }
            whenDone()
            return
        }
        let remaining = Countdown(sources.count)
        let fd = watch.fd
        let live = live
        for source in sources {
            source.setEventHandler(handler: nil)
            source.setCancelHandler {
                if remaining.tick() {
                    if thenClose { _ = closeDescriptor(fd) }
                    whenDone()
                }
                live.leave()
            }
        }
        state.withLock { _ in
            if let read = watch.read, !watch.readArmed { read.resume() }
            if let write = watch.write, !watch.writeArmed { write.resume() }
            // Resumed, without a handler, and forgotten: a report still on its way is stale,
            // and the loop ignores reports for descriptors it no longer watches.
            watch.readArmed = false
            watch.writeArmed = false
            watch.read = nil
            watch.write = nil
        }
        for source in sources { source.cancel() }
    }
}

/// Counts cancel handlers down; only touched on the selector's serial queue.
private final class Countdown: @unchecked Sendable {
    private var left: Int
    init(_ count: Int) { left = count }
    /// True for the last tick.
    func tick() -> Bool {
        left -= 1
        return left == 0
    }
}
