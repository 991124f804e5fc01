import SessionStorage

/// Where each session's journal rows are, kept in memory instead of in an index of the table.
///
/// An index on the session puts a commit's new rows on as many of its pages as the commit has
/// sessions, and pages are what a commit writes and syncs: with one, a commit of eight
/// sessions' batches wrote 14 pages; without, 2 (every new row lands on the table's last page).
/// What the index answered (a session's rows to trim or delete, its running byte total) this
/// answers from memory, and a start, which reads the whole journal anyway, builds it.
///
/// Changes made during a commit are recorded so that a commit that fails can take them back:
/// the index then says what the file says.
struct JournalIndex {
    /// One row of a session's journal: what trimming needs to decide whether it goes.
    struct Row {
        let ordinal: Int64
        let lastSequence: Int
        /// The session's running total of event bytes, this row's included.
        let bytesThrough: Int
    }

    private enum Undo {
        case appended(String)
        case trimmed(String, [Row])
        case removed(String, [Row])
    }

    private var rows: [String: [Row]]
    private var undo: [Undo] = []

    /// The index of rows read from the file, each session's in ordinal order.
    init(rows: [String: [Row]] = [:]) {
        self.rows = rows
    }

    func hasRows(_ id: String) -> Bool {
        rows[id] != nil
    }

    /// The running total a session's next row starts from.
    func bytesThrough(of id: String) -> Int {
        rows[id]?.last?.bytesThrough ?? 0
    }

    /// A row the table just gained.
    mutating func append(_ row: Row, of id: String) {
        rows[id, default: []].append(row)
        undo.append(.appended(id))
    }

    /// Takes out the oldest of a session's rows whose events are all outside the event buffer,
    /// by count (events through `lastSequence - count`) or by bytes; returns their ordinals.
    /// Both bounds only move forward, so what goes is everything before the first row still
    /// inside both.
    mutating func trim(_ id: String, eventsThrough lastSequence: Int, keeping retention: EventRetention) -> [Int64] {
        guard let kept = rows[id], let total = kept.last?.bytesThrough else { return [] }
        let first = kept.firstIndex { $0.lastSequence > lastSequence - retention.count && $0.bytesThrough > total - retention.bytes } ?? kept.count
        guard first > 0 else { return [] }
        let gone = Array(kept[..<first])
        rows[id] = first == kept.count ? nil : Array(kept[first...])
        undo.append(.trimmed(id, gone))
        return gone.map(\.ordinal)
    }

    /// Takes out every row of a session; returns their ordinals.
    mutating func remove(_ id: String) -> [Int64] {
        guard let gone = rows.removeValue(forKey: id) else { return [] }
        undo.append(.removed(id, gone))
        return gone.map(\.ordinal)
    }

    /// The commit that made the changes since the last call is durable.
    mutating func keepChanges() {
        // The room a large commit needed is not kept.
        undo.removeAll(keepingCapacity: undo.capacity <= 1024)
    }

    /// The commit failed: the changes since the last `keepChanges` never happened.
    mutating func discardChanges() {
        while let change = undo.popLast() {
            switch change {
            case .appended(let id):
                rows[id]?.removeLast()
                if rows[id]?.isEmpty == true { rows[id] = nil }
            case .trimmed(let id, let gone), .removed(let id, let gone):
                rows[id] = gone + (rows[id] ?? [])
            }
        }
    }
}
