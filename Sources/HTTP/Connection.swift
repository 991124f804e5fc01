/// One client connection. It belongs to exactly one loop and is touched only on that
/// loop's thread; other threads merely hold a reference to hand back to the loop inside a
/// message (hence `@unchecked Sendable`).
final class Connection: @unchecked Sendable {
    enum ReadPhase {
        case head
        case fixedBody(remaining: Int)
        case chunkedBody
        /// Nothing more is parsed: after an error, a closing request or an event stream.
        case discard
    }

    let fd: Int32
    /// Identifies the connection in the selector's events; the generation tells a reused descriptor apart.
    let token: UInt64
    let peer: PeerAddress
    /// Answered at accept with a refusal and kept only to drain its request: counted in
    /// `refusingConnections`, not `openConnections`.
    let isRefused: Bool

    // Reading. Only leftover bytes of an incomplete head are kept here, never a fixed buffer.
    var phase = ReadPhase.head
    var pending: [UInt8] = []
    var scanner = HeadScanner()
    /// The request whose body is arriving, if one is.
    var body: BodyInProgress?

    // The pipeline: slots[0] has sequence number `firstSequence`.
    var slots: [ResponseSlot] = []
    var firstSequence: UInt64 = 0

    /// Its life: serving, finishing, streaming, lingering or closed.
    var state = ConnectionState()

    // Writing.
    var output = ByteQueue()

    // Loop bookkeeping.
    var interest: Interest = []
    var isDirty = false
    /// Start of the current head, body or idle period, for timeouts.
    var phaseStart: Int64
    /// When navd last wrote to the socket, or saw its client take enough bytes from it.
    private(set) var lastWriteProgress: Int64
    /// What the socket held unacknowledged when a sweep first found the connection waiting to
    /// write since its last progress: what the client has taken since is measured from it.
    var unacknowledgedSinceProgress: Int?
    /// Empty lines skipped before the next request, in bytes: a few are allowed, not endless ones.
    var blankLineBytes = 0
    /// When its client last sent bytes.
    var lastReadProgress: Int64
    /// Its body's bytes as last added to `ServerShared.bufferedBodies`.
    var countedBodyBytes = 0
    /// Refused at the drain's deadline, counted in `ServerShared.refusedAtDeadline` until closed.
    var refusedAtDeadline = false

    init(fd: Int32, token: UInt64, peer: PeerAddress, isRefused: Bool, now: Int64) {
        self.fd = fd
        self.token = token
        self.peer = peer
        self.isRefused = isRefused
        self.phaseStart = now
        self.lastWriteProgress = now
        self.lastReadProgress = now
    }

    /// The socket took bytes, or its client was seen taking them.
    func madeWriteProgress(_ now: Int64) {
        lastWriteProgress = now
        unacknowledgedSinceProgress = nil
    }

    var nextSequence: UInt64 { firstSequence + UInt64(slots.count) }

    /// Requests on one connection take effect in the order sent (RFC 9112 §9.3.2): the next
    /// one is parsed and handed to the handler only once the previous one has been answered
    /// and its answer is mostly on its way.
    func canStartRequest(_ settings: LoopSettings) -> Bool {
        state.acceptsRequests && slots.isEmpty && output.count < settings.outputHighWater
    }

    /// Opens the next slot and returns its sequence number.
    func openSlot(_ slot: ResponseSlot) -> UInt64 {
        let sequence = nextSequence
        slots.append(slot)
        return sequence
    }

    func slotIndex(_ sequence: UInt64) -> Int? {
        guard sequence >= firstSequence else { return nil }
        let index = Int(sequence - firstSequence)
        return index < slots.count ? index : nil
    }

    var isReadingBody: Bool {
        switch phase {
        case .fixedBody, .chunkedBody: true
        case .head, .discard: false
        }
    }

    /// Some bytes of the next request's head have arrived, not yet all of it.
    var isReceivingHead: Bool {
        guard case .head = phase else { return false }
        return scanner.hasStarted || !pending.isEmpty
    }

    /// No request in progress, nothing to write: safe to close at shutdown.
    var isIdle: Bool {
        guard case .head = phase else { return false }
        return slots.isEmpty && output.isEmpty && state.stream == nil && !state.isLingering
    }
}

/// A request whose body is arriving. Kept apart from its connection, which otherwise would carry
/// the head and the decoder's room between requests and for the whole life of an event stream.
final class BodyInProgress {
    let head: RequestHead
    /// The request's place in the pipeline.
    let sequence: UInt64
    var bytes: [UInt8] = []
    var chunked = ChunkedBodyDecoder()

    init(head: RequestHead, sequence: UInt64) {
        self.head = head
        self.sequence = sequence
    }
}
