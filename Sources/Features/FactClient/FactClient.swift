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
    /// The body was longer than the limit; none of it is used.
    case tooLarge(limit: Int)
    /// A redirect within the service's own host, not followed either.
    case redirected(to: String)
    /// A redirect to another host: following it would let whoever answers point navd anywhere.
    case redirectedToAnotherHost(String)
    /// Every fetch the server allows at once is running.
    case tooManyRequests
    /// This session already runs as many fetches as one session may.
    case tooManyForSession(limit: Int)
    /// The session ended (or the work was otherwise cancelled) first; nobody reads the message.
    case cancelled

    public var message: String {
        switch self {
        case .badStatus(let status): "The fact service answered with HTTP status \(status)."
        case .emptyBody: "The fact service sent an empty answer."
        case .timedOut(let seconds): "The fact service did not answer in full within \(seconds.formatted) seconds."
        case .unreachable(let host, let reason): "Could not reach the fact service at \(host): \(reason)."
        case .invalidResponse(let reason): "The fact service sent an unreadable answer: \(reason)."
        case .tooLarge(let limit):
            "The fact service sent more than \(limit % 1024 == 0 ? "\(limit / 1024) KiB" : "\(limit) bytes"); a fact must be shorter."
        case .redirected(let location): "The fact service redirected to \(location); navd follows no redirects, so its fact service address must be updated."
        case .redirectedToAnotherHost(let host): "The fact service redirected to another host (\(host)); navd never follows a redirect to another host."
        case .tooManyRequests: "Too many fact requests are running on the server; try again in a moment."
        case .tooManyForSession(let limit): "This session already has \(limit) fact requests running; wait for one to finish."
        case .cancelled: "The fact request was cancelled."
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
