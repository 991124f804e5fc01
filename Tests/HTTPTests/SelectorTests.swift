#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
@testable import HTTP
import Testing

/// Each backend's selector on its own, over a socket pair: what the event loop relies on.
@Suite struct SelectorTests {
    static let wakeToken: UInt64 = 0

    /// A connected pair of non-blocking stream sockets, closed when the test ends.
    final class SocketPair {
        let local: Int32
        let remote: Int32
        init() throws {
            (local, remote) = try Self.open()
        }
        deinit {
            closeDescriptor(local)
            closeDescriptor(remote)
        }

        /// The same pair left to the test to close: for a test that hangs up `remote` itself
        /// and hands `local` to the selector.
        static func open() throws -> (local: Int32, remote: Int32) {
            var fds: [Int32] = [-1, -1]
            try #require(socketpair(AF_UNIX, streamSocketType, 0, &fds) == 0)
            _ = fcntl(fds[0], F_SETFL, fcntl(fds[0], F_GETFL) | O_NONBLOCK)
            return (fds[0], fds[1])
        }
    }

    /// Everything one wait reports, by token.
    func waitOnce(_ selector: any IOSelector, nanoseconds: Int64 = 50_000_000) -> [UInt64: Readiness] {
        var seen: [UInt64: Readiness] = [:]
        selector.wait(timeoutNanoseconds: nanoseconds) { token, readiness in seen[token, default: []].formUnion(readiness) }
        return seen
    }

    /// What `token` is reported with, over waits until it is `expected` or a second has passed:
    /// Dispatch's sources report one by one, epoll's in one wait.
    func readiness(of token: UInt64, _ selector: any IOSelector, until expected: Readiness) -> Readiness? {
        var seen: Readiness?
        let deadline = MonotonicClock.now() + 1_000_000_000
        while seen != expected && MonotonicClock.now() < deadline {
            if let readiness = waitOnce(selector)[token] { seen = (seen ?? []).union(readiness) }
        }
        return seen
    }

    @Test(arguments: IOBackend.available)
    func reportsWhatEachDescriptorWaitsFor(_ backend: IOBackend) throws {
        let selector = try backend.makeSelector(wakeToken: Self.wakeToken)
        defer { selector.close() }
        let pair = try SocketPair()
        defer { withExtendedLifetime(pair) {} }
        selector.register(pair.local, interest: .readable, token: 7)
        #expect(waitOnce(selector).isEmpty, "nothing to read yet")

        var byte: UInt8 = 1
        #expect(writeDescriptor(pair.remote, &byte, 1) == 1)
        #expect(waitOnce(selector)[7] == .readable)
        // Level-triggered: unread input is reported again.
        #expect(waitOnce(selector)[7] == .readable)

        selector.reregister(pair.local, interest: [.readable, .writable], token: 7)
        #expect(readiness(of: 7, selector, until: [.readable, .writable]) == [.readable, .writable])

        selector.reregister(pair.local, interest: .writable, token: 7)
        _ = waitOnce(selector)
        #expect(waitOnce(selector)[7] == .writable, "no longer reported readable")

        selector.deregister(pair.local)
        #expect(waitOnce(selector).isEmpty)
    }

    @Test(arguments: IOBackend.available)
    func reportsThePeersCloseAsReadable(_ backend: IOBackend) throws {
        let selector = try backend.makeSelector(wakeToken: Self.wakeToken)
        defer { selector.close() }
        let pair = try SocketPair()
        defer { withExtendedLifetime(pair) { selector.deregister(pair.local) } }
        selector.register(pair.local, interest: .readable, token: 9)
        shutdownSocket(pair.remote, Int32(SHUT_WR))
        #expect(waitOnce(selector)[9]?.contains(.readable) == true)
    }

    @Test(arguments: IOBackend.available)
    func aWatchedDescriptorIsClosedByTheSelectorAndNotReportedAfter(_ backend: IOBackend) throws {
        let selector = try backend.makeSelector(wakeToken: Self.wakeToken)
        defer { selector.close() }
        var fds: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, streamSocketType, 0, &fds) == 0)
        defer { closeDescriptor(fds[1]) }
        selector.register(fds[0], interest: [.readable, .writable], token: 5)
        #expect(waitOnce(selector)[5]?.contains(.writable) == true)
        var byte: UInt8 = 1
        _ = writeDescriptor(fds[1], &byte, 1)
        selector.closeWatched(fds[0])
        #expect(waitOnce(selector)[5] == nil, "nothing is reported for a descriptor given up, input or not")
        // Closed once the backend lets go of it (Dispatch: in the last cancel handler), which the
        // other end sees as a hang-up. (Its number says nothing: a test running beside this one
        // may already have been given it again.)
        var peer = pollfd(fd: fds[1], events: Int16(POLLIN), revents: 0)
        #expect(poll(&peer, 1, 5_000) == 1 && peer.revents & Int16(POLLHUP) != 0)
    }

    @Test(arguments: IOBackend.available)
    func aWakeUpFromAnotherThreadEndsTheWaitOnce(_ backend: IOBackend) throws {
        let selector = try backend.makeSelector(wakeToken: Self.wakeToken)
        defer { selector.close() }
        let start = MonotonicClock.now()
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) { [selector] in selector.wakeUp() }
        let seen = waitOnce(selector, nanoseconds: 5_000_000_000)
        #expect(seen.keys.contains(Self.wakeToken))
        #expect(MonotonicClock.now() - start < 4_000_000_000, "the wake-up, not the timeout, ended the wait")
        selector.acknowledgeWakeUp()
        #expect(waitOnce(selector).isEmpty, "acknowledged wake-ups are not reported again")
    }

    /// The loop's sweeps depend on a quiet wait ending at its timeout, also when an earlier wait
    /// with a far later one was ended by something else (Dispatch's timer must be moved).
    @Test(arguments: IOBackend.available)
    func aQuietWaitEndsAtItsTimeout(_ backend: IOBackend) throws {
        let selector = try backend.makeSelector(wakeToken: Self.wakeToken)
        defer { selector.close() }
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) { [selector] in selector.wakeUp() }
        #expect(waitOnce(selector, nanoseconds: 30_000_000_000).keys.contains(Self.wakeToken))
        selector.acknowledgeWakeUp()
        for timeout: Int64 in [100_000_000, 20_000_000, 0] {
            let start = MonotonicClock.now()
            #expect(waitOnce(selector, nanoseconds: timeout).isEmpty)
            let took = MonotonicClock.now() - start
            #expect(took < timeout + 2_000_000_000, "a \(timeout / 1_000_000) ms wait ended at its timeout, took \(took / 1_000_000) ms")
            #expect(took >= timeout - 5_000_000, "a \(timeout / 1_000_000) ms wait did not end early, took \(took / 1_000_000) ms")
        }
    }

    /// A descriptor given up, and a new socket given its number, is watched afresh: libdispatch
    /// on Linux keeps a number's registration until its sources are cancelled, so a listener
    /// closed before that left the next server's listener never reported. `dup2` puts the new
    /// socket at the old number, so other tests opening descriptors cannot take it first.
    @Test(arguments: IOBackend.available)
    func aNumberReusedAfterDeregisterIsReported(_ backend: IOBackend) throws {
        for round in 0..<20 {
            let selector = try backend.makeSelector(wakeToken: Self.wakeToken)
            defer { selector.close() }
            let first = try SocketPair()
            let number = first.local
            selector.register(number, interest: .readable, token: 3)
            selector.deregister(number)
            let second = try SocketPair()
            try #require(dup2(second.local, number) == number, "the number now names the new socket")
            selector.register(number, interest: .readable, token: 4)
            var byte: UInt8 = 1
            #expect(writeDescriptor(second.remote, &byte, 1) == 1)
            #expect(readiness(of: 4, selector, until: .readable) == .readable, "round \(round)")
            selector.deregister(number)
        }
    }

    /// Level-triggered also after the peer hangs up: input left unread after a report, and the
    /// end of input behind it, are reported again (the loop reads once per report). libdispatch
    /// on Linux drops a source's registration when epoll says EPOLLHUP, after one report.
    @Test(arguments: IOBackend.available)
    func inputLeftAfterAHangUpIsReportedAgain(_ backend: IOBackend) throws {
        let selector = try backend.makeSelector(wakeToken: Self.wakeToken)
        defer { selector.close() }
        let (local, remote) = try SocketPair.open()
        defer { selector.closeWatched(local) }
        selector.register(local, interest: .readable, token: 8)
        var bytes: [UInt8] = [1, 2]
        #expect(writeDescriptor(remote, &bytes, 2) == 2)
        closeDescriptor(remote)  // both directions gone: EPOLLHUP on `local`
        #expect(readiness(of: 8, selector, until: [.readable, .failed])?.contains(.readable) == true)
        var byte: UInt8 = 0
        #expect(read(local, &byte, 1) == 1, "one of the two bytes read")
        #expect(readiness(of: 8, selector, until: [.readable, .failed])?.contains(.readable) == true, "the second byte")
        #expect(read(local, &byte, 1) == 1)
        #expect(readiness(of: 8, selector, until: [.readable, .failed])?.contains(.readable) == true, "the end of input")
        #expect(read(local, &byte, 1) == 0)
    }

    /// A hang-up is reported also while the descriptor waits for nothing (its input is not
    /// wanted now), as epoll always reports EPOLLHUP and EPOLLERR: the loop closes the
    /// connection instead of keeping it until its answer is written.
    @Test(arguments: IOBackend.available)
    func aHangUpIsReportedWhileTheDescriptorWaitsForNothing(_ backend: IOBackend) throws {
        let selector = try backend.makeSelector(wakeToken: Self.wakeToken)
        defer { selector.close() }
        let (local, remote) = try SocketPair.open()
        defer { selector.closeWatched(local) }
        selector.register(local, interest: .readable, token: 2)
        #expect(waitOnce(selector).isEmpty)
        selector.reregister(local, interest: [], token: 2)
        closeDescriptor(remote)
        #expect(readiness(of: 2, selector, until: [.readable, .failed])?.contains(.failed) == true)
    }

    /// Readiness re-armed wait after wait, with input arriving before or after the re-arm, is
    /// never missed.
    @Test(arguments: IOBackend.available)
    func readinessIsNeverMissedAcrossReArms(_ backend: IOBackend) throws {
        let selector = try backend.makeSelector(wakeToken: Self.wakeToken)
        defer { selector.close() }
        let pair = try SocketPair()
        defer { withExtendedLifetime(pair) { selector.deregister(pair.local) } }
        selector.register(pair.local, interest: .readable, token: 6)
        let remote = pair.remote
        var missed = 0
        for round in 0..<500 {
            let delay = UInt32(round % 4) * 150
            DispatchQueue.global().async { usleep(delay); var byte: UInt8 = 1; _ = writeDescriptor(remote, &byte, 1) }
            if readiness(of: 6, selector, until: .readable) != .readable { missed += 1 }
            var buffer = [UInt8](repeating: 0, count: 16)
            _ = read(pair.local, &buffer, buffer.count)
        }
        #expect(missed == 0)
    }

    /// An accepted connection is non-blocking and close-on-exec as it arrives: a process the host
    /// spawns must never inherit it (it would keep the connection open past navd's close).
    @Test(arguments: IOBackend.available)
    func acceptedConnectionsAreNonBlockingAndCloseOnExec(_ backend: IOBackend) throws {
        let selector = try backend.makeSelector(wakeToken: Self.wakeToken)
        defer { selector.close() }
        let (listener, port) = try ListeningSocket.open(host: "127.0.0.1", port: 0, backlog: 8)
        defer { closeDescriptor(listener) }
        let client = try TestClient(port: port)
        defer { withExtendedLifetime(client) {} }
        var address = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        var accepted: Int32 = -1
        let deadline = MonotonicClock.now() + 1_000_000_000
        while accepted < 0 && MonotonicClock.now() < deadline {
            accepted = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { type(of: selector).accept(listener, $0, &length) }
            }
            if accepted < 0 { usleep(1_000) }
        }
        try #require(accepted >= 0)
        defer { closeDescriptor(accepted) }
        #expect(fcntl(accepted, F_GETFL) & O_NONBLOCK != 0)
        #expect(fcntl(accepted, F_GETFD) & FD_CLOEXEC != 0)
    }
}
