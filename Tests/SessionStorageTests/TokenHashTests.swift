import SessionStorage
import Testing

/// SHA-256 against the published NIST test vectors (FIPS 180-2 examples and the CAVS short messages).
@Suite struct TokenHashTests {
    private func hex(_ bytes: [UInt8]) -> String {
        bytes.map { String($0, radix: 16).count == 1 ? "0" + String($0, radix: 16) : String($0, radix: 16) }.joined()
    }

    @Test func nistVectors() {
        #expect(hex(TokenHash.sha256(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(hex(TokenHash.sha256([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        #expect(hex(TokenHash.sha256(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)))
                == "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        #expect(hex(TokenHash.sha256(Array(repeating: UInt8(ascii: "a"), count: 1_000_000)))
                == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    @Test func matchesOnlyItsOwnToken() {
        let hash = TokenHash.sha256(Array("secret".utf8))
        #expect(TokenHash.matches("secret", hash))
        #expect(!TokenHash.matches("secreT", hash))
        #expect(!TokenHash.matches("secret", []))
    }
}
