/// A value that cannot become state: names the JSON path at fault so a client can fix its request.
public struct StateError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Where in the JSON the fault is.
    public let path: JSONPath
    /// What is wrong there.
    public let reason: String

    /// A refusal of the value at `path`.
    public init(_ path: JSONPath, _ reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "\(path): \(reason)" }

    static func typeMismatch(_ path: JSONPath, expected: String, found: JSON) -> StateError {
        StateError(path, "expected \(expected), found \(found.typeName)")
    }
}
