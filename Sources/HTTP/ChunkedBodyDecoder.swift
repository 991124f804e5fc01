/// Decodes a `Transfer-Encoding: chunked` body as bytes arrive, keeping all its state here
/// so no partial line has to be buffered. Chunk extensions are skipped; trailer fields are
/// read and dropped.
///
/// Its framing (size lines with their zeros and extensions, line ends) is bounded in bytes as
/// the data is: by the body limit, whatever the chunks' sizes, so a body cannot cost the
/// server unbounded reading (a size line of endless zeros, a small body in one-byte chunks each
/// with a long extension).
struct ChunkedBodyDecoder {
    enum Outcome {
        /// Every byte was consumed and the body is not finished yet.
        case needsMore
        /// The body ended after `consumed` bytes; the rest belongs to the next request.
        case finished(consumed: Int)
        case failure(ProtocolError)
    }

    private enum State {
        case size
        /// Whitespace after the size: only `;` (an extension) or the line's end may follow.
        case sizeWhitespace
        case sizeExtension
        case sizeLineEnd
        case data
        case dataCR
        case dataLF
        case trailerLineStart
        case trailerLine
        case trailerLineEnd
        case finalLineEnd
    }

    private static let maxExtensionBytes = 4096

    private var state = State.size
    private var chunkSize = 0
    private var sizeDigits = 0
    private var remaining = 0
    private var extensionBytes = 0
    private var trailerBytes = 0
    /// Bytes of the body's framing so far: everything but the chunks' data and the trailers.
    private var framingBytes = 0

    mutating func decode(
        _ bytes: UnsafeRawBufferPointer, into body: inout [UInt8], maxBodyBytes: Int, maxTrailerBytes: Int
    ) -> Outcome {
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            switch state {
            case .size, .sizeWhitespace, .sizeExtension, .sizeLineEnd, .dataCR, .dataLF, .finalLineEnd:
                framingBytes += 1
                guard framingBytes <= max(maxBodyBytes, Self.maxExtensionBytes) else { return .failure(.payloadTooLarge) }
            case .data, .trailerLineStart, .trailerLine, .trailerLineEnd:
                break
            }
            switch state {
            case .size:
                if let digit = ASCII.hexValue(byte) {
                    // Checked before shifting, so the size can neither overflow nor go negative.
                    guard chunkSize <= maxBodyBytes, chunkSize < 1 << 56 else { return .failure(.payloadTooLarge) }
                    chunkSize = chunkSize << 4 | Int(digit)
                    sizeDigits += 1
                } else if sizeDigits > 0 && byte == ASCII.semicolon {
                    state = .sizeExtension
                } else if sizeDigits > 0 && ASCII.isWhitespace(byte) {
                    state = .sizeWhitespace
                } else if sizeDigits > 0 && byte == ASCII.cr {
                    state = .sizeLineEnd
                } else {
                    return .failure(.badRequest("Malformed chunk size."))
                }
            case .sizeWhitespace:
                // `5 junk` must not pass as size 5: a proxy reading it otherwise could be desynchronized.
                if byte == ASCII.semicolon {
                    state = .sizeExtension
                } else if byte == ASCII.cr {
                    state = .sizeLineEnd
                } else if !ASCII.isWhitespace(byte) {
                    return .failure(.badRequest("Malformed chunk size."))
                }
            case .sizeExtension:
                if byte == ASCII.cr {
                    state = .sizeLineEnd
                } else {
                    extensionBytes += 1
                    guard byte != ASCII.lf, extensionBytes <= Self.maxExtensionBytes else {
                        return .failure(.badRequest("Malformed chunk extension."))
                    }
                }
            case .sizeLineEnd:
                guard byte == ASCII.lf else { return .failure(.badRequest("Chunk lines must end with CRLF.")) }
                if chunkSize == 0 {
                    state = .trailerLineStart
                } else {
                    guard chunkSize <= maxBodyBytes - body.count else { return .failure(.payloadTooLarge) }
                    remaining = chunkSize
                    state = .data
                }
            case .data:
                let take = min(remaining, bytes.count - index)
                body.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[index..<(index + take)]))
                remaining -= take
                index += take
                if remaining == 0 { state = .dataCR }
                continue
            case .dataCR:
                guard byte == ASCII.cr else { return .failure(.badRequest("Chunk data must end with CRLF.")) }
                state = .dataLF
            case .dataLF:
                guard byte == ASCII.lf else { return .failure(.badRequest("Chunk data must end with CRLF.")) }
                state = .size
                chunkSize = 0
                sizeDigits = 0
                extensionBytes = 0
            case .trailerLineStart:
                state = byte == ASCII.cr ? .finalLineEnd : .trailerLine
                if state == .trailerLine { continue }
            case .trailerLine:
                trailerBytes += 1
                guard trailerBytes <= maxTrailerBytes else { return .failure(.headersTooLarge) }
                if byte == ASCII.cr {
                    state = .trailerLineEnd
                } else if byte == ASCII.lf || (byte < 0x20 && byte != ASCII.tab) {
                    return .failure(.badRequest("Malformed trailer field."))
                }
            case .trailerLineEnd:
                guard byte == ASCII.lf else { return .failure(.badRequest("Trailer lines must end with CRLF.")) }
                state = .trailerLineStart
            case .finalLineEnd:
                guard byte == ASCII.lf else { return .failure(.badRequest("Chunked body must end with CRLF.")) }
                return .finished(consumed: index + 1)
            }
            index += 1
        }
        return .needsMore
    }
}
