#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A joinable POSIX thread running one closure, for work that must not wait for a pool's thread
/// (an event loop, the reading of the store at start); the loops need nothing from Foundation.
public struct LoopThread: Sendable {
    private let handle: pthread_t

    public static func start(_ body: @escaping @Sendable () -> Void) throws(HTTPServerError) -> LoopThread {
        let context = Unmanaged.passRetained(LoopThreadBody(body)).toOpaque()
        // pthread_t is an integer on glibc and a non-null pointer on Darwin.
        #if os(Linux)
        var handle = pthread_t()
        #else
        var handle: pthread_t?
        #endif
        let result = pthread_create(&handle, nil, { runLoopThreadBody($0) }, context)
        guard result == 0 else {
            Unmanaged<LoopThreadBody>.fromOpaque(context).release()
            throw HTTPServerError.system("pthread_create", result)
        }
        #if os(Linux)
        return LoopThread(handle: handle)
        #else
        guard let handle else { throw HTTPServerError.system("pthread_create", EAGAIN) }
        return LoopThread(handle: handle)
        #endif
    }

    public func join() {
        pthread_join(handle, nil)
    }
}

private final class LoopThreadBody {
    let run: @Sendable () -> Void
    init(_ run: @escaping @Sendable () -> Void) { self.run = run }
}

/// The thread's entry point; its argument is optional on glibc and not on Darwin, so both fit.
private func runLoopThreadBody(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let context else { return nil }
    Unmanaged<LoopThreadBody>.fromOpaque(context).takeRetainedValue().run()
    return nil
}
