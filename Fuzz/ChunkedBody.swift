@testable import HTTP

/// A chunked request body as the client sends it (sizes, extensions, data, trailers, and perhaps
/// the next request after it), through `ChunkedBodyDecoder`.
///
/// The decoder keeps its state between reads, so the same bytes are decoded three ways: all at
/// once, one byte per read, and in reads of a few bytes (a size derived from the input). The
/// body, where it ends, and whether it fails must be the same every time, and the body never
/// grows past the limit.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzChunkedBody(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let bytes = UnsafeRawBufferPointer(start: data, count: size)
    let whole = decode(bytes, readSize: max(1, bytes.count))
    let trickled = decode(bytes, readSize: 1)
    let stepped = decode(bytes, readSize: 2 + size % 7)
    guard whole == trickled, whole == stepped else {
        fatalError("the chunked decoder's outcome depends on how the bytes arrive: \(whole), \(trickled), \(stepped)")
    }
    return 0
}

private enum Limits {
    static let body = 1024
    static let trailer = 256
}

private enum Decoded: Equatable {
    case needsMore(body: [UInt8])
    case finished(body: [UInt8], consumed: Int)
    /// Which error may differ: a limit can be reached before a malformed byte arrives.
    case failure
}

/// Feeds `bytes` in reads of `readSize`, as the event loop does, until the body ends or fails.
private func decode(_ bytes: UnsafeRawBufferPointer, readSize: Int) -> Decoded {
    var decoder = ChunkedBodyDecoder()
    var body: [UInt8] = []
    var start = 0
    while start < bytes.count {
        let end = min(bytes.count, start + readSize)
        let outcome = decoder.decode(
            UnsafeRawBufferPointer(rebasing: bytes[start..<end]), into: &body,
            maxBodyBytes: Limits.body, maxTrailerBytes: Limits.trailer)
        guard body.count <= Limits.body else { fatalError("a chunked body grew past the limit: \(body.count) bytes") }
        switch outcome {
        case .needsMore:
            start = end
        case .finished(let consumed):
            guard consumed > 0, consumed <= end - start else { fatalError("consumed \(consumed) of \(end - start) bytes") }
            return .finished(body: body, consumed: start + consumed)
        case .failure:
            return .failure
        }
    }
    return .needsMore(body: body)
}
