/// Writes a JSON string literal (RFC 8259 escaping) straight into bytes.
enum JSONString {
    static func append(_ text: String, to out: inout [UInt8]) {
        out.append(0x22)
        for byte in text.utf8 {
            switch byte {
            case 0x22: ASCII.append(#"\""#, to: &out)
            case 0x5C: ASCII.append(#"\\"#, to: &out)
            case 0x0A: ASCII.append(#"\n"#, to: &out)
            case 0x0D: ASCII.append(#"\r"#, to: &out)
            case 0x09: ASCII.append(#"\t"#, to: &out)
            case 0x08: ASCII.append(#"\b"#, to: &out)
            case 0x0C: ASCII.append(#"\f"#, to: &out)
            case 0x00..<0x20:
                ASCII.append(#"\u00"#, to: &out)
                out.append(hexDigit(byte >> 4))
                out.append(hexDigit(byte & 0x0F))
            default: out.append(byte)
            }
        }
        out.append(0x22)
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? 0x30 + value : 0x61 + value - 10
    }
}
