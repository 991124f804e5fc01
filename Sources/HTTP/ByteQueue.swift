/// Bytes waiting for a socket: a queue of arrays that are shared, never copied, and an
/// offset into the first one. One event can sit in thousands of queues at the cost of a
/// reference each.
struct ByteQueue {
    private var chunks: [[UInt8]] = []
    private var head = 0
    private var offset = 0
    /// Unsent bytes.
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// Unsent bytes behind the chunk being written: the backlog a slow client builds, as
    /// opposed to the one message it is reading now.
    var countBehindFirst: Int {
        head < chunks.count ? count - (chunks[head].count - offset) : 0
    }

    mutating func append(_ bytes: [UInt8]) {
        guard !bytes.isEmpty else { return }
        chunks.append(bytes)
        count += bytes.count
    }

    /// Puts up to `limit` chunk references (not their bytes) into `out` and returns how many
    /// bytes of the first one were already sent.
    func peek(into out: inout [[UInt8]], limit: Int) -> Int {
        out.removeAll(keepingCapacity: true)
        var index = head
        while index < chunks.count && out.count < limit {
            out.append(chunks[index])
            index += 1
        }
        return offset
    }

    /// Drops `sent` bytes from the front.
    mutating func consume(_ sent: Int) {
        var left = min(sent, count)
        count -= left
        while left > 0 && head < chunks.count {
            let available = chunks[head].count - offset
            if left >= available {
                chunks[head] = []
                head += 1
                offset = 0
                left -= available
            } else {
                offset += left
                left = 0
            }
        }
        if head == chunks.count {
            // Idle queues keep at most a small array so that many idle streams stay cheap.
            chunks.removeAll(keepingCapacity: chunks.capacity <= 4)
            head = 0
        } else if head >= 32 && head * 2 >= chunks.count {
            chunks.removeFirst(head)
            head = 0
        }
    }

    mutating func removeAll() {
        chunks = []
        head = 0
        offset = 0
        count = 0
    }
}
