/// The bits of text handling navd needs beyond the standard library, so nothing on the
/// server path imports Foundation (and with it the ICU data).
extension StringProtocol {
    /// One or more ASCII digits and nothing else: a version, an event id, a port. (`Int()`
    /// alone also takes a sign.)
    var isDecimalDigits: Bool {
        !isEmpty && utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }

    /// Without leading and trailing spaces and tabs, the whitespace of HTTP fields and flags.
    var trimmingSpaces: Substring {
        let text = Substring(self)
        let start = text.firstIndex { $0 != " " && $0 != "\t" } ?? text.endIndex
        let end = text[start...].lastIndex { $0 != " " && $0 != "\t" }.map { text.index(after: $0) } ?? start
        return text[start..<end]
    }

    /// Padded with spaces to `width` characters (never cut), for `--help`'s columns.
    func padded(to width: Int) -> String {
        String(self) + String(repeating: " ", count: Swift.max(0, width - count))
    }
}
