import Features

/// Counts fact fetches by outcome for `/metrics`, around whichever client does the fetching.
struct MeteredFactClient: FactClient {
    let base: any FactClient
    let metrics: Metrics

    func fact(about number: Int) async throws(FactError) -> String {
        do {
            let fact = try await base.fact(about: number)
            metrics.factFetched("success")
            return fact
        } catch {
            metrics.factFetched(error.outcome)
            throw error
        }
    }
}

private extension FactError {
    var outcome: String {
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
