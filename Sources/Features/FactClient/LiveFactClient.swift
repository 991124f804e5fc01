import CCurl

/// Fetches `GET {baseURL}/{number}` from a numbers-API-style service with libcurl and uses the
/// plain-text body.
///
/// A fact service's answer is hostile input: `timeout` is a deadline for the whole fetch, a body
/// over `maxBodyBytes` is refused and no more of it is read, and no redirect is followed. Not
/// even one to the same host: another port or scheme there can be just as internal, and a
/// moved service is fixed by pointing the base URL at its new address.
public struct LiveFactClient: FactClient {
    /// The longest fact accepted by default, in bytes; as long as a string in state may be by default.
    public static let maxBodyBytes = 64 * 1024

    public let baseURL: FactServiceURL
    public let timeout: Duration
    /// The longest fact accepted: a fact becomes a string in state, so no longer than one may be.
    public let maxBodyBytes: Int
    private let loop = CurlTransferLoop()

    public init(baseURL: FactServiceURL, timeout: Duration = .seconds(5), maxBodyBytes: Int = LiveFactClient.maxBodyBytes) {
        self.baseURL = baseURL
        self.timeout = timeout
        self.maxBodyBytes = maxBodyBytes
    }

    /// Cancelling the calling task (its session ended) stops the transfer at once.
    public func fact(about number: Int) async throws(FactError) -> String {
        let url = baseURL.url(for: number)
        guard let transfer = CurlTransfer(url: url, deadline: timeout, maxBodyBytes: maxBodyBytes) else {
            throw .unreachable(host: baseURL.authority, reason: "libcurl could not start a transfer")
        }
        let loop = loop
        let outcome = await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                transfer.onFinish(continuation)
                loop.run(transfer)
            }
        } onCancel: {
            transfer.cancel()
            loop.wake()
        }
        switch outcome {
        case .cancelled:
            throw .cancelled
        case .tooLarge:
            throw .tooLarge(limit: maxBodyBytes)
        case .failed(let code, let detail):
            throw map(code, detail)
        case .response(let status, let body, let redirect):
            if (300..<400).contains(status), let redirect {
                throw redirection(to: redirect)
            }
            guard (200..<300).contains(status) else { throw .badStatus(status) }
            guard let text = String(validating: body, as: UTF8.self) else {
                throw .invalidResponse("the body is not UTF-8 text")
            }
            let fact = text.trimmingWhitespace
            guard !fact.isEmpty else { throw .emptyBody }
            return fact
        }
    }

    private func redirection(to location: String) -> FactError {
        let targetHost = FactServiceURL.host(of: location)
        if let targetHost, targetHost == baseURL.host {
            return .redirected(to: location.clipped)
        }
        return .redirectedToAnotherHost((targetHost ?? location).clipped)
    }

    private func map(_ code: CURLcode, _ detail: String) -> FactError {
        switch code {
        case CURLE_OPERATION_TIMEDOUT: .timedOut(seconds: timeout.seconds)
        case CURLE_COULDNT_CONNECT: .unreachable(host: baseURL.authority, reason: "connection refused")
        case CURLE_COULDNT_RESOLVE_HOST: .unreachable(host: baseURL.authority, reason: "unknown host")
        case CURLE_GOT_NOTHING, CURLE_WEIRD_SERVER_REPLY, CURLE_PARTIAL_FILE, CURLE_RECV_ERROR:
            .invalidResponse(detail)
        default: .unreachable(host: baseURL.authority, reason: detail)
        }
    }

}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}

private extension String {
    /// The service chose this text: short enough for an alert whatever it sent.
    var clipped: String {
        count <= 200 ? self : prefix(200) + "…"
    }

    var trimmingWhitespace: String {
        guard let first = firstIndex(where: { !$0.isWhitespace }), let last = lastIndex(where: { !$0.isWhitespace }) else { return "" }
        return String(self[first...last])
    }
}
