import CCurl
import Synchronization

/// One `GET` on its own libcurl easy handle, bounded in time (a deadline for the whole transfer)
/// and in bytes (the body is refused, and reading stops, past `maxBodyBytes`). Redirects are
/// never followed: the caller decides what a 3xx means.
///
/// Made on the caller's thread, then owned by the transfer loop's thread until it finishes.
/// Only `isCancelled` is touched from elsewhere, hence `@unchecked Sendable`.
final class CurlTransfer: @unchecked Sendable {
    /// How a transfer ended.
    enum Outcome: Sendable {
        /// An HTTP answer arrived in full. `redirect` is where a 3xx pointed, resolved.
        case response(status: Int, body: [UInt8], redirect: String?)
        /// The body grew past the limit (or said it would) and was dropped.
        case tooLarge
        case failed(CURLcode, String)
        case cancelled
    }

    let handle: UnsafeMutableRawPointer
    private let headers: UnsafeMutablePointer<curl_slist>?
    private let errorBuffer: UnsafeMutablePointer<CChar>
    private let maxBodyBytes: Int
    private var body: [UInt8] = []
    private var exceeded = false
    private let cancelled = Atomic<Bool>(false)
    private var continuation: CheckedContinuation<Outcome, Never>?

    /// `nil` when libcurl cannot make a handle (out of memory).
    init?(url: String, deadline: Duration, maxBodyBytes: Int) {
        guard CurlLibrary.isReady, let handle = curl_easy_init() else { return nil }
        self.handle = handle
        self.maxBodyBytes = maxBodyBytes
        errorBuffer = .allocate(capacity: Int(CURL_ERROR_SIZE))
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE))
        headers = curl_slist_append(nil, "Accept: text/plain")
        let milliseconds = max(1, Int(deadline.components.seconds) * 1000 + Int(deadline.components.attoseconds / 1_000_000_000_000_000))
        // Signals are not libcurl's to use in a threaded server; timeouts use its own timers.
        navd_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
        navd_curl_setopt_string(handle, CURLOPT_URL, url)
        navd_curl_setopt_string(handle, CURLOPT_PROTOCOLS_STR, "http,https")
        navd_curl_setopt_long(handle, CURLOPT_FOLLOWLOCATION, 0)
        // The deadline covers everything, DNS to last byte: a service dripping bytes still ends.
        navd_curl_setopt_long(handle, CURLOPT_TIMEOUT_MS, milliseconds)
        navd_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT_MS, milliseconds)
        // Refused before the first byte when the length is announced; the write callback
        // covers bodies that do not announce it.
        navd_curl_setopt_offset(handle, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(maxBodyBytes))
        navd_curl_setopt_list(handle, CURLOPT_HTTPHEADER, headers)
        navd_curl_setopt_string(handle, CURLOPT_USERAGENT, "navd")
        navd_curl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errorBuffer)
        navd_curl_setopt_write_function(handle) { data, size, count, context in
            guard let context else { return 0 }
            let transfer = Unmanaged<CurlTransfer>.fromOpaque(context).takeUnretainedValue()
            return transfer.receive(UnsafeRawBufferPointer(start: data, count: size * count))
        }
        // Unretained: the loop keeps the transfer alive while libcurl may call back.
        navd_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit {
        curl_easy_cleanup(handle)
        curl_slist_free_all(headers)
        errorBuffer.deallocate()
    }

    var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    func cancel() { cancelled.store(true, ordering: .releasing) }

    /// Called once, before the transfer is handed to the loop.
    func onFinish(_ continuation: CheckedContinuation<Outcome, Never>) {
        self.continuation = continuation
    }

    /// Resumes the waiting fetch; later calls do nothing.
    func finish(_ outcome: Outcome) {
        continuation?.resume(returning: outcome)
        continuation = nil
    }

    /// What libcurl's result means, read on the loop's thread once the transfer is done.
    func outcome(of result: CURLcode) -> Outcome {
        if exceeded || result == CURLE_FILESIZE_EXCEEDED { return .tooLarge }
        guard result == CURLE_OK else {
            let detail = errorBuffer.pointee == 0 ? String(cString: curl_easy_strerror(result)) : String(cString: errorBuffer)
            return .failed(result, detail)
        }
        var status = 0
        navd_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        var location: UnsafeMutablePointer<CChar>?
        navd_curl_getinfo_string(handle, CURLINFO_REDIRECT_URL, &location)
        return .response(status: status, body: body, redirect: location.map { String(cString: $0) })
    }

    /// libcurl's write callback: keeps the body while it fits, and stops the transfer (by taking
    /// none of the bytes) once it would not.
    private func receive(_ bytes: UnsafeRawBufferPointer) -> Int {
        guard body.count + bytes.count <= maxBodyBytes else {
            exceeded = true
            body = []
            return 0
        }
        body.append(contentsOf: bytes)
        return bytes.count
    }
}

/// libcurl's process-wide setup, done once before the first handle.
enum CurlLibrary {
    static let isReady: Bool = navd_curl_global_init() == CURLE_OK
}
