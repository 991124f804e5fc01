/// The last events of a session, kept so a client that reconnects can resume without a gap.
struct EventLog {
    let capacity: Int
    private var buffer: [NavigationEvent] = []
    private var start = 0

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    mutating func append(_ event: NavigationEvent) {
        guard capacity > 0 else { return }
        if buffer.count < capacity {
            buffer.append(event)
        } else {
            buffer[start] = event
            start = (start + 1) % capacity
        }
    }

    /// Every event after `sequence`, or `nil` if some of them are no longer kept.
    func events(after sequence: Int, lastIssued: Int) -> [NavigationEvent]? {
        guard sequence >= 0, sequence <= lastIssued else { return nil }
        if sequence == lastIssued { return [] }
        let ordered = buffer.count < capacity ? buffer : Array(buffer[start...] + buffer[..<start])
        guard let first = ordered.first, first.sequence <= sequence + 1 else { return nil }
        return Array(ordered.drop(while: { $0.sequence <= sequence }))
    }
}
