/// Fetches a fact about a number. A protocol so tests and benchmarks can use a local service.
public protocol FactClient: Sendable {
    func fact(about number: Int) async throws(FactError) -> String
}

/// Why a fact could not be fetched. The message is what the user reads in the alert.
public enum FactError: Error, Sendable, Equatable {
    case badStatus(Int)
    case emptyBody
    case timedOut(seconds: Double)
    case unreachable(host: String, reason: String)
    case invalidResponse(String)

    public var message: String {
        switch self {
        case .badStatus(let status): "The fact service answered with HTTP status \(status)."
        case .emptyBody: "The fact service sent an empty answer."
        case .timedOut(let seconds): "The fact service did not answer within \(seconds.formatted) seconds."
        case .unreachable(let host, let reason): "Could not reach the fact service at \(host): \(reason)."
        case .invalidResponse(let reason): "The fact service sent an unreadable answer: \(reason)."
        }
    }
}

extension Error {
    /// What the alert says.
    var message: String {
        (self as? FactError)?.message ?? "Could not fetch a fact: \(self)."
    }
}

private extension Double {
    var formatted: String {
        rounded() == self ? String(Int(self)) : String(self)
    }
}
