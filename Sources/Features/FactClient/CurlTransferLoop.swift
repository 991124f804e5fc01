import CCurl
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Runs transfers on one thread of its own with libcurl's multi interface.
///
/// Not on the cooperative pool: a transfer waits on sockets, and a pool thread blocked per fetch
/// would take a core's worth of Swift concurrency away from every session. Not a thread per
/// fetch with `curl_easy_perform`: one thread waits on all sockets at once, however many
/// fetches run, and a cancellation wakes it at once (`curl_multi_wakeup`) rather than at a
/// progress callback. The thread starts with the first transfer and ends when none is left, so
/// an idle server holds no thread.
final class CurlTransferLoop: Sendable {
    private struct Shared {
        /// Handed over, not yet added to the multi handle.
        var incoming: [CurlTransfer] = []
        /// The running thread's multi handle; `nil` while no thread runs.
        var multi: UnsafeMutableRawPointer?
    }

    private let shared = Mutex(Shared())

    /// Hands `transfer` to the loop's thread, starting it if none runs; `transfer` is finished
    /// exactly once from then on.
    func run(_ transfer: CurlTransfer) {
        enum Next { case woken, start(UnsafeMutableRawPointer), failed }
        let next: Next = shared.withLock { shared in
            shared.incoming.append(transfer)
            if let multi = shared.multi {
                // Under the lock: the thread cannot end, and free the handle, while work waits.
                curl_multi_wakeup(multi)
                return .woken
            }
            guard let multi = curl_multi_init() else { return .failed }
            shared.multi = multi
            return .start(multi)
        }
        let multi: UnsafeMutableRawPointer
        switch next {
        case .woken: return
        case .failed: return failStranded("libcurl could not start a transfer")
        case .start(let handle): multi = handle
        }
        let context = Unmanaged.passRetained(ThreadBody { [self] in drive(multi) }).toOpaque()
        // pthread_t is an integer on glibc and a non-null pointer on Darwin.
        #if os(Linux)
        var thread = pthread_t()
        #else
        var thread: pthread_t?
        #endif
        guard pthread_create(&thread, nil, { runThreadBody($0) }, context) == 0 else {
            Unmanaged<ThreadBody>.fromOpaque(context).release()
            shared.withLock { $0.multi = nil }
            curl_multi_cleanup(multi)
            failStranded("could not start the fetching thread")
            return
        }
        #if os(Linux)
        pthread_detach(thread)
        #else
        if let thread { pthread_detach(thread) }
        #endif
    }

    /// Makes the thread look at cancelled transfers now.
    func wake() {
        shared.withLock { shared in
            if let multi = shared.multi { curl_multi_wakeup(multi) }
        }
    }

    /// Finishes the transfers no thread will pick up: none if another caller started one meanwhile.
    private func failStranded(_ reason: String) {
        let stranded = shared.withLock { shared -> [CurlTransfer] in
            if shared.multi != nil { return [] }
            defer { shared.incoming = [] }
            return shared.incoming
        }
        for transfer in stranded { transfer.finish(.failed(CURLE_FAILED_INIT, reason)) }
    }

    /// The thread: adds what was handed over, drops what was cancelled, lets libcurl move every
    /// transfer on, finishes what completed, and sleeps until a socket, a timer or a wakeup.
    private func drive(_ multi: UnsafeMutableRawPointer) {
        var active: [CurlTransfer] = []
        while true {
            let isIdle = active.isEmpty
            let incoming: [CurlTransfer]? = shared.withLock { shared in
                if shared.incoming.isEmpty, isIdle {
                    shared.multi = nil
                    return nil
                }
                defer { shared.incoming = [] }
                return shared.incoming
            }
            guard let incoming else { break }
            for transfer in incoming {
                if curl_multi_add_handle(multi, transfer.handle) == CURLM_OK {
                    active.append(transfer)
                } else {
                    transfer.finish(.failed(CURLE_FAILED_INIT, "libcurl refused the transfer"))
                }
            }
            active.removeAll { transfer in
                guard transfer.isCancelled else { return false }
                curl_multi_remove_handle(multi, transfer.handle)
                transfer.finish(.cancelled)
                return true
            }
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            var queued: Int32 = 0
            while let message = curl_multi_info_read(multi, &queued) {
                guard message.pointee.msg == CURLMSG_DONE,
                      let index = active.firstIndex(where: { $0.handle == message.pointee.easy_handle }) else { continue }
                let result = navd_curl_message_result(message)
                let transfer = active.remove(at: index)
                let outcome = transfer.outcome(of: result)
                curl_multi_remove_handle(multi, transfer.handle)
                transfer.finish(outcome)
            }
            // libcurl shortens the wait to its next timer (a deadline, a retry).
            if !active.isEmpty { curl_multi_poll(multi, nil, 0, 1000, nil) }
        }
        curl_multi_cleanup(multi)
    }
}

/// What the new thread runs; it alone uses the multi handle it captures.
private final class ThreadBody {
    let run: () -> Void
    init(_ run: @escaping () -> Void) { self.run = run }
}

/// The thread's entry point; its argument is optional on glibc and not on Darwin, so both fit.
private func runThreadBody(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let context else { return nil }
    Unmanaged<ThreadBody>.fromOpaque(context).takeRetainedValue().run()
    return nil
}
