#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
@testable import HTTP
import Testing

/// The platform's selector on its own, over a socket pair: what the event loop relies on.
@Suite struct SelectorTests {
    static let wakeToken: UInt64 = 0

    /// A connected pair of non-blocking stream sockets, closed when the test ends.
    final class SocketPair {
        let local: Int32
        let remote: Int32
        init() throws {
            var fds: [Int32] = [-1, -1]
            try #require(socketpair(AF_UNIX, streamSocketType, 0, &fds) == 0)
            local = fds[0]
            remote = fds[1]
            _ = fcntl(local, F_SETFL, fcntl(local, F_GETFL) | O_NONBLOCK)
        }
        deinit {
            closeDescriptor(local)
            closeDescriptor(remote)
        }
    }

    /// Everything one wait reports, by token.
    func waitOnce(_ selector: PlatformSelector, nanoseconds: Int64 = 50_000_000) -> [UInt64: Readiness] {
        var seen: [UInt64: Readiness] = [:]
        selector.wait(timeoutNanoseconds: nanoseconds) { token, readiness in seen[token, default: []].formUnion(readiness) }
        return seen
    }

    @Test func reportsWhatEachDescriptorWaitsFor() throws {
        let selector = try PlatformSelector(capacity: 8, wakeToken: Self.wakeToken)
        defer { selector.close() }
        let pair = try SocketPair()
        selector.register(pair.local, interest: .readable, token: 7)
        #expect(waitOnce(selector).isEmpty, "nothing to read yet")

        var byte: UInt8 = 1
        #expect(writeDescriptor(pair.remote, &byte, 1) == 1)
        #expect(waitOnce(selector)[7] == .readable)
        // Level-triggered: unread input is reported again.
        #expect(waitOnce(selector)[7] == .readable)

        selector.reregister(pair.local, interest: [.readable, .writable], token: 7)
        #expect(waitOnce(selector)[7] == [.readable, .writable])

        selector.reregister(pair.local, interest: .writable, token: 7)
        #expect(waitOnce(selector)[7] == .writable)

        selector.deregister(pair.local)
        #expect(waitOnce(selector).isEmpty)
    }

    @Test func reportsThePeersCloseAsReadable() throws {
        let selector = try PlatformSelector(capacity: 8, wakeToken: Self.wakeToken)
        defer { selector.close() }
        let pair = try SocketPair()
        selector.register(pair.local, interest: .readable, token: 9)
        shutdownSocket(pair.remote, Int32(SHUT_WR))
        #expect(waitOnce(selector)[9]?.contains(.readable) == true)
    }

    @Test func aWakeUpFromAnotherThreadEndsTheWaitOnce() throws {
        let selector = try PlatformSelector(capacity: 8, wakeToken: Self.wakeToken)
        defer { selector.close() }
        let start = MonotonicClock.now()
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(50)) { [selector] in selector.wakeUp() }
        let seen = waitOnce(selector, nanoseconds: 5_000_000_000)
        #expect(seen.keys.contains(Self.wakeToken))
        #expect(MonotonicClock.now() - start < 4_000_000_000, "the wake-up, not the timeout, ended the wait")
        selector.acknowledgeWakeUp()
        #expect(waitOnce(selector).isEmpty, "acknowledged wake-ups are not reported again")
    }
}
