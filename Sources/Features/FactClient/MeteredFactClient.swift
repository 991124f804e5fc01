/// Reports each fetch's outcome (`success`, `http_error`, `timeout`, ...) around whichever
/// client does the fetching, so a host can count them (navd's `navd_fact_fetches_total`).
public struct MeteredFactClient: FactClient {
    public let base: any FactClient
    public let record: @Sendable (String) -> Void

    public init(base: any FactClient, record: @escaping @Sendable (String) -> Void) {
        self.base = base
        self.record = record
    }

    public func fact(about number: Int) async throws(FactError) -> String {
        do {
            let fact = try await base.fact(about: number)
            record("success")
            return fact
        } catch {
            record(error.outcome)
            throw error
        }
    }
}

extension FactError {
    /// A fixed name per failure, fit for a metric label.
    public var outcome: String {
        switch self {
        case .badStatus: "http_error"
        case .emptyBody: "empty_body"
        case .timedOut: "timeout"
        case .unreachable: "unreachable"
        case .invalidResponse: "invalid_response"
        case .tooLarge: "too_large"
        case .redirected, .redirectedToAnotherHost: "redirect"
        case .tooManyRequests, .tooManyForSession: "busy"
        case .cancelled: "cancelled"
        }
    }
}
