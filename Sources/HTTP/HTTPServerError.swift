#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why the server could not start, in words fit for a log line.
public struct HTTPServerError: Error, Sendable, CustomStringConvertible {
    public let description: String
    /// The `errno` behind the failure, if a system call failed.
    public let code: Int32?

    /// The address or port cannot be used on this machine whatever happens (not one of its
    /// addresses, a privileged port): a setting to change, not a moment to wait out. An
    /// address in use is not one of these, since its holder may be on its way out.
    public var isUnusableSetting: Bool {
        guard let code else { return false }
        return code == EADDRNOTAVAIL || code == EACCES || code == EAFNOSUPPORT
    }

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
