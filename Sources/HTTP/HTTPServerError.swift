import Glibc

/// Why the server could not start, in words fit for a log line.
public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    public let description: String
    /// The `errno` behind the failure, if a system call failed.
    public let code: Int32?

    init(_ description: String, code: Int32? = nil) {
        self.description = description
        self.code = code
    }

    static func system(_ call: String, _ code: Int32) -> HTTPServerError {
        HTTPServerError("\(call) failed: \(SystemError.message(code))", code: code)
    }
}

/// Text for an `errno` value.
enum SystemError {
    static func message(_ code: Int32) -> String {
        guard let text = strerror(code) else { return "errno \(code)" }
        return String(cString: text) + " (errno \(code))"
    }
}
