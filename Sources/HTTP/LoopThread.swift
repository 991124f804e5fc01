import Glibc

/// A joinable POSIX thread running one closure; the loops need nothing from Foundation.
struct LoopThread: Sendable {
    private final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }

    private let handle: pthread_t

    static func start(_ body: @escaping @Sendable () -> Void) throws(HTTPServerError) -> LoopThread {
        let context = Unmanaged.passRetained(Body(body)).toOpaque()
        var handle = pthread_t()
        let result = pthread_create(&handle, nil, { context in
            guard let context else { return nil }
            Unmanaged<Body>.fromOpaque(context).takeRetainedValue().run()
            return nil
        }, context)
        guard result == 0 else {
            Unmanaged<Body>.fromOpaque(context).release()
            throw HTTPServerError.system("pthread_create", result)
        }
        return LoopThread(handle: handle)
    }

    func join() {
        pthread_join(handle, nil)
    }
}
