import COpenSSL

/// How a session token is kept at rest: its SHA-256, so a copy of the store opens no session.
/// The digest is the system's OpenSSL, not one of our own.
public enum TokenHash {
    /// A SHA-256 digest's length.
    public static let byteCount = 32

    /// SHA-256, fetched from OpenSSL's provider once: `EVP_sha256()` makes every digest look the
    /// implementation up again, which cost more than the hashing (a token is checked on every
    /// request). A fetched algorithm is immutable and safe to share between threads.
    nonisolated(unsafe) private static let algorithm: OpaquePointer? = EVP_MD_fetch(nil, "SHA256", nil)

    public static func sha256(_ bytes: [UInt8]) -> [UInt8] {
        var digest = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        // EVP_Digest fails only when memory runs out; a hash that matches nothing is the safe answer.
        let length = bytes.withUnsafeBytes { input in digest.withUnsafeMutableBufferPointer { sha256(input, into: $0) } }
        return Array(digest.prefix(length ?? 0))
    }

    /// The digest of `input` into `digest` (room for `EVP_MAX_MD_SIZE` bytes): its length, or nil
    /// when OpenSSL fails.
    private static func sha256(_ input: UnsafeRawBufferPointer, into digest: UnsafeMutableBufferPointer<UInt8>) -> Int? {
        var length: UInt32 = 0
        guard EVP_Digest(input.baseAddress, input.count, digest.baseAddress, &length, algorithm ?? EVP_sha256(), nil) == 1 else { return nil }
        return Int(length)
    }

    /// Compares in constant time, so how long a refusal takes says nothing about the token.
    /// Hashes the token where it lies, into a buffer on the stack: a token is checked on every
    /// request, and copies of it would be allocations on every request.
    public static func matches(_ candidate: String, _ hash: [UInt8]) -> Bool {
        matches(candidate[...], hash)
    }

    /// `matches` for a token read out of a longer text (a header), without a copy of its own.
    public static func matches(_ candidate: Substring, _ hash: [UInt8]) -> Bool {
        guard hash.count == byteCount else { return false }
        var candidate = candidate
        return candidate.withUTF8 { input in
            withUnsafeTemporaryAllocation(of: UInt8.self, capacity: Int(EVP_MAX_MD_SIZE)) { digest in
                guard sha256(UnsafeRawBufferPointer(input), into: digest) == byteCount else { return false }
                var difference: UInt8 = 0
                for index in 0..<byteCount { difference |= digest[index] ^ hash[index] }
                return difference == 0
            }
        }
    }
}
