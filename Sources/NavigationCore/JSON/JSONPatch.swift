/// A JSON Patch (RFC 6902): how one JSON document became another, as `add`, `remove` and
/// `replace` operations on JSON Pointers (RFC 6901).
///
/// A durable session stores what each transaction changed rather than its whole state. The
/// diff keeps what is unchanged: an object is diffed key by key, and an array that grew or
/// shrank at its end (a path pushed or popped) by its common part plus the tail.
public enum JSONPatch {
    /// A patch that does not apply to the document it was given.
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public let description: String
    }

    /// The operations that turn `old` into `new`; empty when they are equal.
    public static func diff(from old: JSON, to new: JSON) -> JSON {
        var operations: [JSON] = []
        var path: [PathComponent] = []
        diff(old, new, path: &path, into: &operations)
        return .array(operations)
    }

    /// A step of the pointer being walked; spelled out only for the operations emitted, since
    /// most of a state is unchanged.
    private enum PathComponent {
        case key(String)
        case index(Int)
        case end
    }

    private static func diff(_ old: JSON, _ new: JSON, path: inout [PathComponent], into operations: inout [JSON]) {
        switch (old, new) {
        case (.object(let before), .object(let after)):
            if sharesStorage(before.pairs, after.pairs) { return }
            for pair in before.pairs where after[pair.key] == nil {
                path.append(.key(pair.key))
                operations.append(operation("remove", path))
                path.removeLast()
            }
            for pair in after.pairs {
                path.append(.key(pair.key))
                if let previous = before[pair.key] {
                    diff(previous, pair.value, path: &path, into: &operations)
                } else {
                    operations.append(operation("add", path, pair.value))
                }
                path.removeLast()
            }
        case (.array(let before), .array(let after)):
            if sharesStorage(before, after) { return }
            let common = min(before.count, after.count)
            for index in 0..<common {
                path.append(.index(index))
                diff(before[index], after[index], path: &path, into: &operations)
                path.removeLast()
            }
            // Removed from the end backwards, so each index is valid when it is applied.
            for index in stride(from: before.count - 1, through: after.count, by: -1) {
                path.append(.index(index))
                operations.append(operation("remove", path))
                path.removeLast()
            }
            path.append(.end)
            for index in common..<after.count { operations.append(operation("add", path, after[index])) }
            path.removeLast()
        default:
            if old != new { operations.append(operation("replace", path, new)) }
        }
    }

    /// Two arrays on one buffer hold the same elements: a part of the state whose encoding was
    /// kept (`EncodedStates`) is the very value the last batch recorded, and is passed over
    /// without a walk.
    private static func sharesStorage<Element>(_ first: [Element], _ second: [Element]) -> Bool {
        first.count == second.count
            && first.withUnsafeBufferPointer { one in second.withUnsafeBufferPointer { other in one.baseAddress == other.baseAddress } }
    }

    private static func operation(_ op: String, _ path: [PathComponent], _ value: JSON? = nil) -> JSON {
        var object = JSONObject([("op", .string(op)), ("path", .string(pointer(path)))])
        if let value { object.append("value", value) }
        return .object(object)
    }

    /// RFC 6901: `~` is written `~0` and `/` is written `~1` within a key.
    private static func pointer(_ path: [PathComponent]) -> String {
        var pointer = ""
        for component in path {
            pointer += "/"
            switch component {
            case .index(let index): pointer += String(index)
            case .end: pointer += "-"
            case .key(let key):
                for character in key.unicodeScalars {
                    switch character {
                    case "~": pointer += "~0"
                    case "/": pointer += "~1"
                    default: pointer.unicodeScalars.append(character)
                    }
                }
            }
        }
        return pointer
    }

    /// Applies `patch` to `document`; fails, changing nothing, on any operation that does not fit.
    public static func apply(_ patch: JSON, to document: JSON) throws(Failure) -> JSON {
        guard case .array(let operations) = patch else { throw Failure(description: "a patch is an array of operations") }
        var result = document
        for operation in operations {
            guard let op = operation["op"]?.stringValue, let path = operation["path"]?.stringValue else {
                throw Failure(description: "an operation needs op and path")
            }
            let tokens = try parse(pointer: path)
            switch op {
            case "add", "replace":
                guard let value = operation["value"] else { throw Failure(description: "\(op) \(path) needs a value") }
                try set(&result, tokens[...], value, adding: op == "add")
            case "remove":
                try remove(&result, tokens[...])
            default:
                throw Failure(description: "unsupported operation \(op)")
            }
        }
        return result
    }

    private static func parse(pointer: String) throws(Failure) -> [String] {
        if pointer.isEmpty { return [] }
        guard pointer.hasPrefix("/") else { throw Failure(description: "\(pointer) is not a JSON Pointer") }
        return pointer.dropFirst().split(separator: "/", omittingEmptySubsequences: false).map {
            String($0).pointerUnescaped
        }
    }

    private static func set(_ target: inout JSON, _ tokens: ArraySlice<String>, _ value: JSON, adding: Bool) throws(Failure) {
        guard let token = tokens.first else {
            target = value
            return
        }
        let rest = tokens.dropFirst()
        switch target {
        case .object(var object):
            if rest.isEmpty {
                guard adding || object[token] != nil else { throw Failure(description: "no member \(token) to replace") }
                object[token] = value
            } else {
                guard var child = object[token] else { throw Failure(description: "no member \(token)") }
                try set(&child, rest, value, adding: adding)
                object[token] = child
            }
            target = .object(object)
        case .array(var array):
            if rest.isEmpty && adding && token == "-" {
                array.append(value)
            } else {
                guard let index = Int(token), index >= 0, index < array.count + (rest.isEmpty && adding ? 1 : 0) else {
                    throw Failure(description: "index \(token) is out of range")
                }
                if rest.isEmpty {
                    if adding { array.insert(value, at: index) } else { array[index] = value }
                } else {
                    try set(&array[index], rest, value, adding: adding)
                }
            }
            target = .array(array)
        default:
            throw Failure(description: "\(token) does not name a member or an element")
        }
    }

    private static func remove(_ target: inout JSON, _ tokens: ArraySlice<String>) throws(Failure) {
        guard let token = tokens.first else { throw Failure(description: "cannot remove the whole document") }
        let rest = tokens.dropFirst()
        switch target {
        case .object(var object):
            guard var child = object[token] else { throw Failure(description: "no member \(token)") }
            if rest.isEmpty {
                object[token] = nil
            } else {
                try remove(&child, rest)
                object[token] = child
            }
            target = .object(object)
        case .array(var array):
            guard let index = Int(token), array.indices.contains(index) else { throw Failure(description: "index \(token) is out of range") }
            if rest.isEmpty { array.remove(at: index) } else { try remove(&array[index], rest) }
            target = .array(array)
        default:
            throw Failure(description: "\(token) does not name a member or an element")
        }
    }
}

/// RFC 6901's escapes read a character at a time: the standard library's own loop, not the
/// string-processing module's `split(separator:)` (which would bring its regex engine into the binary).
private extension String {
    /// `~1` as `/` and `~0` as `~`, in one pass, so `~01` is `~1`; any other `~` stays.
    var pointerUnescaped: String {
        var unescaped = ""
        var afterTilde = false
        for character in self {
            if afterTilde {
                afterTilde = false
                switch character {
                case "0": unescaped.append("~"); continue
                case "1": unescaped.append("/"); continue
                default: unescaped.append("~")
                }
            }
            if character == "~" { afterTilde = true } else { unescaped.append(character) }
        }
        if afterTilde { unescaped.append("~") }
        return unescaped
    }
}
