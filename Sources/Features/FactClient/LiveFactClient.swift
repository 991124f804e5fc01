import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Fetches `GET {baseURL}/{number}` from a numbers-API-style service with URLSession (libcurl on
/// Linux) and uses the plain-text body.
public struct LiveFactClient: FactClient {
    public let baseURL: URL
    public let timeout: Duration
    private let session: URLSession

    public init(baseURL: URL, timeout: Duration = .seconds(5)) {
        self.baseURL = baseURL
        self.timeout = timeout
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = timeout.seconds
        configuration.timeoutIntervalForResource = timeout.seconds
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        session = URLSession(configuration: configuration)
    }

    public func fact(about number: Int) async throws(FactError) -> String {
        var request = URLRequest(url: baseURL.appendingPathComponent(String(number)))
        request.timeoutInterval = timeout.seconds
        request.setValue("text/plain", forHTTPHeaderField: "Accept")
        let data: Data
        let response: URLResponse
        do {
            (data, response) = try await session.data(for: request)
        } catch let error as URLError {
            throw map(error)
        } catch {
            throw .invalidResponse(String(describing: error))
        }
        guard let http = response as? HTTPURLResponse else { throw .invalidResponse("not an HTTP response") }
        guard (200..<300).contains(http.statusCode) else { throw .badStatus(http.statusCode) }
        guard let text = String(data: data, encoding: .utf8) else { throw .invalidResponse("the body is not UTF-8 text") }
        let fact = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !fact.isEmpty else { throw .emptyBody }
        return fact
    }

    private func map(_ error: URLError) -> FactError {
        let host = baseURL.host.map { host in baseURL.port.map { "\(host):\($0)" } ?? host } ?? baseURL.absoluteString
        switch error.code {
        case .timedOut: return .timedOut(seconds: timeout.seconds)
        case .cannotConnectToHost: return .unreachable(host: host, reason: "connection refused")
        case .cannotFindHost, .dnsLookupFailed: return .unreachable(host: host, reason: "unknown host")
        case .notConnectedToInternet, .networkConnectionLost: return .unreachable(host: host, reason: "no network")
        default: return .unreachable(host: host, reason: error.localizedDescription)
        }
    }
}

extension Duration {
    var seconds: Double {
        let (seconds, attoseconds) = components
        return Double(seconds) + Double(attoseconds) / 1e18
    }
}
