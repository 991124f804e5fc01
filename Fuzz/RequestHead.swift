@testable import HTTP

/// The bytes of one connection, as a client may send them: pipelined request heads, each
/// followed by the body its framing announces (a length, or chunks through the chunked decoder).
///
/// Each head is found by `HeadScanner` twice: once on all the bytes at hand, and once as if
/// they arrived one byte per read. Where the head ends, or that it fails, must not depend on how
/// the bytes were split. A complete head then goes through `RequestHeadParser`. The limits are
/// small so that the fuzzer reaches them.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRequestHead(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    let stream = UnsafeRawBufferPointer(start: data, count: size)
    var offset = 0
    while offset < stream.count {
        let rest = UnsafeRawBufferPointer(rebasing: stream[offset...])
        let whole = scan(rest)
        let trickled = scanByteByByte(rest)
        guard whole == trickled else {
            fatalError("the head scanner's outcome depends on how the bytes arrive: \(whole) at once, \(trickled) byte by byte")
        }
        guard case .complete(let length, let requestLineLength) = whole else { return 0 }
        let parsed = RequestHeadParser.parse(
            UnsafeRawBufferPointer(rebasing: rest[0..<length]), requestLineLength: requestLineLength,
            maxBodyBytes: Limits.body)
        guard case .success(let head) = parsed else { return 0 }
        offset += length
        switch head.framing {
        case .none:
            break
        case .length(let count):
            guard count <= Limits.body else { fatalError("a Content-Length over the limit was accepted: \(count)") }
            offset += count
        case .chunked:
            var decoder = ChunkedBodyDecoder()
            var body: [UInt8] = []
            let outcome = decoder.decode(
                UnsafeRawBufferPointer(rebasing: stream[offset...]), into: &body,
                maxBodyBytes: Limits.body, maxTrailerBytes: Limits.headers)
            guard case .finished(let consumed) = outcome else { return 0 }
            offset += consumed
        }
    }
    return 0
}

private enum Limits {
    static let requestLine = 256
    static let headers = 1024
    static let body = 4096
}

/// What the scanner made of a head, comparable between the two ways of feeding it.
private enum Scanned: Equatable {
    case incomplete
    case complete(length: Int, requestLineLength: Int)
    /// Which error may differ: a limit can be reached before the malformed byte arrives.
    case failure
}

private func scan(_ bytes: UnsafeRawBufferPointer) -> Scanned {
    var scanner = HeadScanner()
    return scanned(scanner.scan(bytes, maxRequestLine: Limits.requestLine, maxHeaderBytes: Limits.headers))
}

/// As the event loop calls it when every read brings one more byte: the buffer grows in place.
private func scanByteByByte(_ bytes: UnsafeRawBufferPointer) -> Scanned {
    var scanner = HeadScanner()
    for end in 1...max(1, bytes.count) where end <= bytes.count {
        let outcome = scanned(scanner.scan(
            UnsafeRawBufferPointer(rebasing: bytes[0..<end]),
            maxRequestLine: Limits.requestLine, maxHeaderBytes: Limits.headers))
        if outcome != .incomplete { return outcome }
    }
    return .incomplete
}

private func scanned(_ outcome: HeadScanner.Outcome) -> Scanned {
    switch outcome {
    case .incomplete: .incomplete
    case .complete(let length, let requestLineLength): .complete(length: length, requestLineLength: requestLineLength)
    case .failure: .failure
    }
}
