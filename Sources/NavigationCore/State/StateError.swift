/// A value that cannot become state: names the JSON path at fault so a client can fix its request.
public struct StateError: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: JSONPath
    public let reason: String

    public init(_ path: JSONPath, _ reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "\(path): \(reason)" }

    static func typeMismatch(_ path: JSONPath, expected: String, found: JSON) -> StateError {
        StateError(path, "expected \(expected), found \(found.typeName)")
    }
}
