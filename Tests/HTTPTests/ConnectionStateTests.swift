@testable import HTTP
import Testing

/// The connection's life as a value: each transition, and each timeout, without a socket.
@Suite struct ConnectionStateTests {
    private static let second: Int64 = 1_000_000_000

    /// Every timeout a distinct number of seconds, so a test can tell which one decided.
    private static let settings: LoopSettings = {
        var configuration = HTTPServer.Configuration()
        configuration.headerTimeout = .seconds(2)
        configuration.bodyTimeout = .seconds(3)
        configuration.idleTimeout = .seconds(5)
        configuration.streamCloseTimeout = .seconds(7)
        configuration.lingerTimeout = .seconds(11)
        configuration.streamStallTimeout = .seconds(13)
        configuration.streamBufferLimit = 100
        return LoopSettings(configuration)
    }()

    private func stream() -> EventStream { EventStream(endedWith: .closedByServer) }

    /// A quiet connection between requests: nothing received, nothing owed.
    private func quiet(_ elapsed: Int64, phase: Connection.ReadPhase = .head) -> ConnectionState.Activity {
        ConnectionState.Activity(elapsedInPhase: elapsed, sinceWriteProgress: 0, outputPending: false, outputBytes: 0,
                                 unansweredRequests: false, readPhase: phase, receivingHead: false,
                                 canStartRequest: true, streamQueuedBytes: 0)
    }

    @Test func aConnectionServesUntilItStopsAcceptingThenLingersAfterItsLastAnswer() {
        var state = ConnectionState()
        #expect(state.acceptsRequests)
        let betweenRequests = state.outputDrained().next
        #expect(betweenRequests == .readOn, "between requests it reads on")
        #expect(state.acceptsRequests)
        state.stopAcceptingRequests()
        #expect(!state.acceptsRequests)
        #expect(!state.endsAfterOutput, "answers still owed are written first")
        let withAnswersOwed = state.outputDrained().next
        #expect(withAnswersOwed == .readOn)
        state.lastAnswerQueued()
        #expect(state.endsAfterOutput)
        let afterLastAnswer = state.outputDrained().next
        #expect(afterLastAnswer == .linger)
    }

    @Test func aStreamCarriesTheConnectionAndAHeadOnlyStreamEndsOnceItsHeadIsOut() {
        let carried = stream()
        var state = ConnectionState()
        state.streamStarted(carried, headOnly: false)
        #expect(state.stream === carried)
        #expect(!state.acceptsRequests)
        let streaming = state.outputDrained().next
        #expect(streaming == .writeStream)
        state.lastAnswerQueued()
        #expect(state.stream === carried, "an answer cannot end a stream")

        let head = stream()
        var headOnly = ConnectionState()
        headOnly.streamStarted(head, headOnly: true)
        #expect(headOnly.endsAfterOutput)
        let (next, ended) = headOnly.outputDrained()
        #expect(next == .linger)
        #expect(ended === head)
        #expect(headOnly.stream == nil)
    }

    @Test func lingeringStartsOnceAndOnlyWhileTheClientCanStillSend() {
        var state = ConnectionState()
        let first = state.beginLinger(now: 10, enabled: true)
        #expect(first == .shutDownWriting)
        #expect(state.isLingering)
        let second = state.beginLinger(now: 20, enabled: true)
        #expect(second == .nothing)

        var off = ConnectionState()
        let lingerOff = off.beginLinger(now: 0, enabled: false)
        #expect(lingerOff == .close)

        var peerGone = ConnectionState()
        let fin = peerGone.peerClosed(owesAnswers: true)
        #expect(fin == .answerWhatArrived)
        let afterFin = peerGone.beginLinger(now: 0, enabled: true)
        #expect(afterFin == .close, "no one is left to read the FIN")

        var closed = ConnectionState()
        _ = closed.close()
        let afterClose = closed.beginLinger(now: 0, enabled: true)
        #expect(afterClose == .nothing)
    }

    @Test func closingHappensOnceAndLetsGoOfTheStream() {
        var state = ConnectionState()
        state.streamStarted(stream(), headOnly: false)
        let closedNow = state.close()
        #expect(closedNow)
        #expect(state.isClosed)
        #expect(state.stream == nil)
        #expect(!state.acceptsRequests)
        let closedAgain = state.close()
        #expect(!closedAgain, "a second close does nothing")
        state.streamStarted(stream(), headOnly: false)
        state.lastAnswerQueued()
        #expect(state.isClosed, "nothing reopens a closed connection")
    }

    @Test func theClientsFinClosesAtOnceUnlessAnswersAreOwed() {
        var idle = ConnectionState()
        let idleFin = idle.peerClosed(owesAnswers: false)
        #expect(idleFin == .close)
        #expect(!idle.peerHasClosed)

        var busy = ConnectionState()
        let busyFin = busy.peerClosed(owesAnswers: true)
        #expect(busyFin == .answerWhatArrived)
        #expect(busy.peerHasClosed)

        var streaming = ConnectionState()
        streaming.streamStarted(stream(), headOnly: false)
        let streamFin = streaming.peerClosed(owesAnswers: true)
        #expect(streamFin == .close)

        var lingering = ConnectionState()
        _ = lingering.beginLinger(now: 0, enabled: true)
        let lingerFin = lingering.peerClosed(owesAnswers: true)
        #expect(lingerFin == .close)
    }

    @Test func aQuietConnectionWaitsForItsFirstHeadLessLongThanBetweenRequests() {
        var state = ConnectionState()
        let settings = Self.settings
        #expect(state.expired(quiet(2 * Self.second), now: 0, settings: settings) == nil)
        #expect(state.expired(quiet(3 * Self.second), now: 0, settings: settings) == .close(.clientClosed))
        state.requestDispatched()
        #expect(state.expired(quiet(3 * Self.second), now: 0, settings: settings) == nil)
        #expect(state.expired(quiet(6 * Self.second), now: 0, settings: settings) == .close(.clientClosed))
    }

    @Test func aSlowHeadOrBodyIsAnswered408AndAnUnreadAnswerCloses() {
        let settings = Self.settings
        let state = ConnectionState()
        var receiving = quiet(3 * Self.second)
        receiving.receivingHead = true
        #expect(state.expired(receiving, now: 0, settings: settings) == .refuseHead)
        // A head waiting behind an unanswered request is not the client's delay.
        receiving.canStartRequest = false
        receiving.unansweredRequests = true
        #expect(state.expired(receiving, now: 0, settings: settings) == nil)

        #expect(state.expired(quiet(3 * Self.second, phase: .fixedBody(remaining: 1)), now: 0, settings: settings) == nil)
        #expect(state.expired(quiet(4 * Self.second, phase: .chunkedBody), now: 0, settings: settings) == .refuseBody)
        #expect(state.expired(quiet(100 * Self.second, phase: .discard), now: 0, settings: settings) == nil)

        var unread = quiet(0)
        unread.outputPending = true
        unread.unansweredRequests = true
        unread.sinceWriteProgress = 6 * Self.second
        #expect(state.expired(unread, now: 0, settings: settings) == .close(.tooSlow))
    }

    /// An unread answer larger than a stream may hold waits only as long as a stalled stream.
    @Test func aLargeUnreadAnswerClosesAfterTheStallTimeout() {
        var configuration = HTTPServer.Configuration()
        configuration.idleTimeout = .seconds(60)
        configuration.streamStallTimeout = .seconds(5)
        configuration.streamBufferLimit = 100
        let settings = LoopSettings(configuration)
        let state = ConnectionState()
        var unread = quiet(0)
        unread.outputPending = true
        unread.unansweredRequests = true
        unread.outputBytes = 100
        unread.sinceWriteProgress = 6 * Self.second
        #expect(state.expired(unread, now: 0, settings: settings) == nil, "a small answer waits for the idle timeout")
        unread.outputBytes = 101
        #expect(state.expired(unread, now: 0, settings: settings) == .close(.tooSlow))
        unread.sinceWriteProgress = 4 * Self.second
        #expect(state.expired(unread, now: 0, settings: settings) == nil, "taken within the stall timeout")
        // While the server's clients are over their bound together, a small one too.
        unread.outputBytes = 10
        unread.sinceWriteProgress = 6 * Self.second
        #expect(state.expired(unread, now: 0, settings: settings) == nil)
        unread.outputPressed = true
        #expect(state.expired(unread, now: 0, settings: settings) == .close(.tooSlow))
        // More than a sixteenth of a stream's limit, while pressed: two sweeps, as a stream far behind.
        unread.outputBytes = 7
        unread.sinceWriteProgress = 2 * settings.sweepInterval
        #expect(state.expired(unread, now: 0, settings: settings) == nil, "taken within two sweeps")
        unread.sinceWriteProgress = 2 * settings.sweepInterval + 1
        #expect(state.expired(unread, now: 0, settings: settings) == .close(.tooSlow))
        unread.outputBytes = 6
        #expect(state.expired(unread, now: 0, settings: settings) == nil, "a small one gets the stall timeout")
        unread.outputPressed = false
        unread.outputBytes = 7
        unread.sinceWriteProgress = 4 * Self.second
        #expect(state.expired(unread, now: 0, settings: settings) == nil, "unpressed, the idle timeout")
    }

    /// With the server's clients over `maxBufferedOutput`, a stream whose client takes nothing
    /// goes within two sweeps when more than a sixteenth of its limit behind, after the stall
    /// timeout when less; one whose client reads, or that waits for nothing, stays.
    @Test func underOutputPressureAStreamItsClientDoesNotReadCloses() {
        let settings = Self.settings
        #expect(settings.sweepInterval == 250_000_000)
        var state = ConnectionState()
        state.streamStarted(stream(), headOnly: false)
        var activity = quiet(0)
        activity.outputPressed = true
        activity.streamQueuedBytes = 7
        activity.sinceWriteProgress = 14 * Self.second
        #expect(state.expired(activity, now: 0, settings: settings) == nil, "not blocked: the loop writes it")
        state.streamWrote(blocked: true)
        #expect(state.expired(activity, now: 0, settings: settings) == .close(.tooSlow))
        activity.sinceWriteProgress = 400_000_000
        #expect(state.expired(activity, now: 0, settings: settings) == nil, "its client took some within two sweeps")
        activity.sinceWriteProgress = 600_000_000
        #expect(state.expired(activity, now: 0, settings: settings) == .close(.tooSlow))
        // A sixteenth of the limit of 100 or less behind: the stall timeout (13 s).
        activity.streamQueuedBytes = 6
        #expect(state.expired(activity, now: 0, settings: settings) == nil)
        activity.sinceWriteProgress = 12 * Self.second
        #expect(state.expired(activity, now: 0, settings: settings) == nil)
        activity.sinceWriteProgress = 14 * Self.second
        #expect(state.expired(activity, now: 0, settings: settings) == .close(.tooSlow))
        activity.outputPressed = false
        #expect(state.expired(activity, now: 0, settings: settings) == nil, "within its own limit")
    }

    /// With the bodies being received together over `maxBufferedBodies`, one whose client has
    /// sent nothing for two sweeps is refused; one whose client sends stays, to its own timeout.
    @Test func underInputPressureABodyItsClientStoppedSendingIsRefused() {
        let settings = Self.settings
        let state = ConnectionState()
        var activity = quiet(Self.second, phase: .fixedBody(remaining: 1))
        activity.sinceReadProgress = 2 * settings.sweepInterval + 1
        #expect(state.expired(activity, now: 0, settings: settings) == nil, "not pressed: the body timeout")
        activity.bodiesPressed = true
        #expect(state.expired(activity, now: 0, settings: settings) == .refuseBody)
        activity.sinceReadProgress = 2 * settings.sweepInterval
        #expect(state.expired(activity, now: 0, settings: settings) == nil, "its client sent some within two sweeps")
        activity = quiet(Self.second, phase: .chunkedBody)
        activity.bodiesPressed = true
        activity.sinceReadProgress = Self.second
        #expect(state.expired(activity, now: 0, settings: settings) == .refuseBody)
        activity = quiet(Self.second)
        activity.bodiesPressed = true
        activity.sinceReadProgress = Self.second
        #expect(state.expired(activity, now: 0, settings: settings) == nil, "no body on its way")
    }

    @Test func lingeringEndsAfterTheLingerTimeoutFromItsStart() {
        var state = ConnectionState()
        _ = state.beginLinger(now: 100 * Self.second, enabled: true)
        #expect(state.expired(quiet(0), now: 110 * Self.second, settings: Self.settings) == nil)
        #expect(state.expired(quiet(0), now: 112 * Self.second, settings: Self.settings) == .close(.clientClosed))
    }

    @Test func aStreamClosesWhenItsCloseWaitsTooLongOrItsClientStopsReading() {
        let settings = Self.settings
        var state = ConnectionState()
        state.streamStarted(stream(), headOnly: false)
        var activity = quiet(100 * Self.second)
        #expect(state.expired(activity, now: 100 * Self.second, settings: settings) == nil, "an idle stream stays open")

        // Too slow takes all three: waiting for the socket, no progress for the stall timeout, over the limit.
        activity.sinceWriteProgress = 14 * Self.second
        activity.streamQueuedBytes = 101
        #expect(state.expired(activity, now: 0, settings: settings) == nil, "not blocked: the loop writes it")
        state.streamWrote(blocked: true)
        #expect(state.expired(activity, now: 0, settings: settings) == .close(.tooSlow))
        activity.streamQueuedBytes = 100
        #expect(state.expired(activity, now: 0, settings: settings) == nil)
        activity.streamQueuedBytes = 101
        activity.sinceWriteProgress = 12 * Self.second
        #expect(state.expired(activity, now: 0, settings: settings) == nil)

        // The close timeout runs from the first time the close was seen waiting.
        state.streamCloseWaits(now: 50 * Self.second)
        state.streamCloseWaits(now: 55 * Self.second)
        activity = quiet(0)
        #expect(state.expired(activity, now: 57 * Self.second, settings: settings) == nil)
        #expect(state.expired(activity, now: 58 * Self.second, settings: settings) == .close(.closedByServer))
        state.streamWrote(blocked: false)
        #expect(!state.isStreamBlocked)
    }

    @Test func aClosedConnectionHasNoTimeouts() {
        var state = ConnectionState()
        _ = state.close()
        #expect(state.expired(quiet(1_000 * Self.second), now: 0, settings: Self.settings) == nil)
    }

    /// Shutdown calls stopAcceptingRequests on a connection whose "Connection: close" answer is
    /// still queued: it must still end after that answer.
    @Test func stoppingAfterTheLastAnswerIsQueuedKeepsIt() {
        var state = ConnectionState()
        state.lastAnswerQueued()
        state.stopAcceptingRequests()
        #expect(state.endsAfterOutput)
        let next = state.outputDrained().next
        #expect(next == .linger)
    }

    /// The stream's blocked flag is what the loop's writable interest follows.
    @Test func aBlockedStreamSaysSo() {
        var state = ConnectionState()
        state.streamStarted(stream(), headOnly: false)
        state.streamWrote(blocked: true)
        #expect(state.isStreamBlocked)
        #expect(!state.endsAfterOutput, "only a head-only stream ends after its output")
    }

    /// A stream whose head is still unsent (output pending, not yet blocked itself) is too slow too.
    @Test func aStreamStalledBehindItsHeadIsTooSlow() {
        var state = ConnectionState()
        state.streamStarted(stream(), headOnly: false)
        var activity = quiet(0)
        activity.outputPending = true
        activity.sinceWriteProgress = 14 * Self.second
        activity.streamQueuedBytes = 101
        #expect(state.expired(activity, now: 0, settings: Self.settings) == .close(.tooSlow))
        activity.sinceWriteProgress = 13 * Self.second
        state.streamWrote(blocked: true)
        #expect(state.expired(activity, now: 0, settings: Self.settings) == nil, "the stall timeout is strict")
    }

    /// An unread answer is bounded by the idle timeout, not the header timeout.
    @Test func anUnreadAnswerWaitsTheIdleTimeout() {
        let state = ConnectionState()
        var unread = quiet(0)
        unread.outputPending = true
        unread.unansweredRequests = true
        unread.sinceWriteProgress = 4 * Self.second
        #expect(state.expired(unread, now: 0, settings: Self.settings) == nil)
    }

    @Test func lingeringLastsTheWholeLingerTimeout() {
        var state = ConnectionState()
        _ = state.beginLinger(now: 100 * Self.second, enabled: true)
        #expect(state.expired(quiet(0), now: 111 * Self.second, settings: Self.settings) == nil)
    }
}
