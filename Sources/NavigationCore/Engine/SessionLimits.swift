/// How large one session may grow, in events kept for resuming and in state.
///
/// A session's memory is whatever its clients put into it, so every dimension a client can
/// grow has a bound: what a request carries is measured before anything changes, and growth
/// through actions is measured before it is committed. Beyond a bound the request is refused
/// (`state_too_large`) and the session stays as it was.
public struct SessionLimits: Sendable, Equatable {
    /// Events kept for `Last-Event-ID` resumes, by count…
    public var eventBufferCount: Int
    /// …and by encoded bytes; the oldest go first, and a resume from before them gets a snapshot.
    public var eventBufferBytes: Int
    /// Elements in one stack, and items in any list a client sends.
    public var maxPathLength: Int
    /// Feature instances on screen, and JSON objects and arrays in a state a client sends.
    public var maxNodes: Int
    /// UTF-8 bytes of any one string in state.
    public var maxStringBytes: Int
    /// Features nested in one another on screen (each presentation and stack element one level
    /// below its owner), and objects and arrays nested in a value a client sends. Every document
    /// navd derives from a state (the tree, a snapshot, what the store keeps) nests deeper than
    /// the state, a few levels per feature; this bound keeps them readable again, by navd after
    /// a restart and by clients. Growth is checked where a feature gains a child, one level at
    /// a time, as actions grow a tree: a feature whose own code builds a deep subtree in one step
    /// must bound it itself (it can pass this limit unrefused, and thousands of levels exhaust a
    /// thread's stack in the models' own recursion).
    public var maxDepth: Int
    /// Bytes of every feature's `state` on screen together, as compact JSON: the bound on what a
    /// session holds, which the others only bound one dimension at a time (a session filling
    /// them all would hold gigabytes). Checked when a session is made, before a transaction
    /// near it commits and before an effect's change is published (one that crosses it is
    /// dropped); a change that leaves a session over it, as one made under a larger bound may
    /// be, is refused only if it grows the state.
    public var maxStateBytes: Int
    /// What this session and every other sharing the budget may hold together; nil for no bound
    /// beyond the ones above.
    public var memory: MemoryBudget?

    /// Limits with navd's defaults unless given.
    public init(
        eventBufferCount: Int = 1024,
        eventBufferBytes: Int = 8 << 20,
        maxPathLength: Int = 1000,
        maxNodes: Int = 10_000,
        maxStringBytes: Int = 64 << 10,
        maxDepth: Int = 64,
        maxStateBytes: Int = 4 << 20,
        memory: MemoryBudget? = nil
    ) {
        self.eventBufferCount = eventBufferCount
        self.eventBufferBytes = eventBufferBytes
        self.maxPathLength = maxPathLength
        self.maxNodes = maxNodes
        self.maxStringBytes = maxStringBytes
        self.maxDepth = maxDepth
        self.maxStateBytes = maxStateBytes
        self.memory = memory
    }

    /// Measures a value a client sent as state, an argument or a binding, before it is used.
    public func check(_ value: JSON, at path: JSONPath) throws(StateError) {
        var containers = 0
        try check(value, at: path, depth: 0, containers: &containers)
    }

    private func check(_ value: JSON, at path: JSONPath, depth: Int, containers: inout Int) throws(StateError) {
        switch value {
        case .null, .bool, .int, .double:
            return
        case .string(let text):
            guard text.utf8.count <= maxStringBytes else {
                throw StateError(path, "a string of \(text.utf8.count) bytes is longer than this server's limit of \(maxStringBytes)")
            }
        case .array(let items):
            guard items.count <= maxPathLength else {
                throw StateError(path, "\(items.count) items are more than this server's limit of \(maxPathLength)")
            }
            try count(&containers, depth: depth, at: path)
            for (index, item) in items.enumerated() {
                try check(item, at: path.appending(index: index), depth: depth + 1, containers: &containers)
            }
        case .object(let object):
            try count(&containers, depth: depth, at: path)
            for pair in object.pairs { try check(pair.value, at: path.appending(pair.key), depth: depth + 1, containers: &containers) }
        }
    }

    private func count(_ containers: inout Int, depth: Int, at path: JSONPath) throws(StateError) {
        guard depth < maxDepth else {
            throw StateError(path, "objects and arrays nest deeper than this server's limit of \(maxDepth)")
        }
        containers += 1
        guard containers <= maxNodes else {
            throw StateError(path, "the state holds more than this server's limit of \(maxNodes) objects and arrays")
        }
    }
}
