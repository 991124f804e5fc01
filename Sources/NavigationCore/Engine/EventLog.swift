/// The last events of a session, kept so a client that reconnects can resume without a gap.
///
/// Bounded by count and by encoded bytes: a few huge events (a long text typed into a binding)
/// must not hold more memory than many small ones. The oldest go first; a client that asks for
/// events from before what is kept gets a snapshot instead.
struct EventLog {
    let capacity: Int
    let byteLimit: Int
    /// Kept events from `head` on; slots before it are released (nil) until compaction.
    private var slots: [NavigationEvent?] = []
    private var head = 0
    private(set) var bytes = 0

    init(capacity: Int, byteLimit: Int) {
        self.capacity = max(0, capacity)
        self.byteLimit = max(0, byteLimit)
    }

    var count: Int { slots.count - head }

    /// The kept events, oldest first.
    var kept: [NavigationEvent] { slots[head...].compactMap { $0 } }

    /// Keeps `event`, dropping the oldest past either bound; unless `mayGrow`, past the bytes
    /// kept before it too (the sessions' `MemoryBudget` is spent).
    mutating func append(_ event: NavigationEvent, mayGrow: Bool = true) {
        guard capacity > 0 else { return }
        let ceiling = mayGrow ? byteLimit : min(byteLimit, bytes)
        slots.append(event)
        bytes += event.encodedData.count
        while count > capacity || (bytes > ceiling && count > 0) { dropOldest() }
        compact()
    }

    /// Drops the oldest events until those kept take at most `limit` bytes.
    mutating func trim(toBytes limit: Int) {
        while bytes > limit && count > 0 { dropOldest() }
        compact()
    }

    /// Releases the slots of dropped events once they are half of all.
    private mutating func compact() {
        if head >= 64 && head * 2 >= slots.count {
            slots.removeFirst(head)
            head = 0
        }
    }

    private mutating func dropOldest() {
        bytes -= slots[head]?.encodedData.count ?? 0
        slots[head] = nil
        head += 1
    }

    /// Every event after `sequence`, or `nil` if some of them are no longer kept.
    func events(after sequence: Int, lastIssued: Int) -> [NavigationEvent]? {
        guard sequence >= 0, sequence <= lastIssued else { return nil }
        if sequence == lastIssued { return [] }
        guard head < slots.count, let first = slots[head], first.sequence <= sequence + 1 else { return nil }
        return slots[head...].compactMap { event in event.flatMap { $0.sequence > sequence ? $0 : nil } }
    }
}
