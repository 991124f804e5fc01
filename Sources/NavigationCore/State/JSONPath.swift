/// Where in a request body a value sits, written as clients read it: `state.path[2].counter.count`.
public struct JSONPath: Sendable, Equatable, CustomStringConvertible {
    public private(set) var description: String

    /// A path at `root` (`state`, `args`).
    public init(_ root: String) { description = root }

    /// The path of an object's key.
    public func appending(_ key: String) -> JSONPath {
        var path = self
        path.description += description.isEmpty ? key : "." + key
        return path
    }

    /// The path of an array's element.
    public func appending(index: Int) -> JSONPath {
        var path = self
        path.description += "[\(index)]"
        return path
    }

    /// The path this one was made from by `appending(key)`.
    func parent(removing key: String) -> JSONPath {
        var path = self
        if description == key {
            path.description = ""
        } else if description.hasSuffix("." + key) {
            path.description.removeLast(key.count + 1)
        }
        return path
    }
}
