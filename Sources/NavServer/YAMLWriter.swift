import NavigationCore

/// JSON written as block-style YAML in the layout `openapi.yaml` uses by hand: nested mappings
/// indented by two, short mappings and lists of scalars on one line (`{type: integer}`,
/// `[app, counter]`), strings plain where YAML reads them back as the same string and
/// double-quoted (JSON's escapes, which YAML shares) where it would not.
enum YAMLWriter {
    /// The lines of `value` (an object) as the body of a mapping at `indent` spaces.
    static func mapping(_ object: JSONObject, indent: Int) -> String {
        var out = ""
        for (key, value) in object.pairs {
            out += String(repeating: " ", count: indent) + scalar(key) + ":"
            if let flow = flow(value) {
                out += " " + flow + "\n"
            } else if case .object(let nested) = value {
                out += "\n" + mapping(nested, indent: indent + 2)
            } else if case .array(let items) = value {
                out += "\n"
                for item in items {
                    let dash = String(repeating: " ", count: indent + 2) + "- "
                    if let flow = flow(item) {
                        out += dash + flow + "\n"
                    } else if case .object(let nested) = item {
                        // The item's first key goes on the dash's line, the others under it.
                        out += dash + mapping(nested, indent: indent + 4).dropFirst(indent + 4)
                    }
                }
            }
        }
        return out
    }

    /// One line for short values, `nil` for what needs a block.
    private static func flow(_ value: JSON) -> String? {
        let text: String
        switch value {
        case .object(let object):
            let parts = object.pairs.map { key, value in flow(value).map { scalar(key) + ": " + $0 } }
            guard parts.allSatisfy({ $0 != nil }) else { return nil }
            text = "{" + parts.compactMap { $0 }.joined(separator: ", ") + "}"
        case .array(let items):
            let parts = items.map(flow)
            guard parts.allSatisfy({ $0 != nil }) else { return nil }
            text = "[" + parts.compactMap { $0 }.joined(separator: ", ") + "]"
        case .string(let string): return scalar(string)
        default: return JSONWriter.string(value)
        }
        return text.count <= 100 ? text : nil
    }

    /// A plain scalar when it cannot be read as anything but this string, else JSON's quoting.
    static func scalar(_ string: String) -> String {
        let reserved: Set<String> = ["null", "true", "false", "yes", "no", "on", "off", "y", "n", "~"]
        let plain = string.first.map { $0.isLetter || $0 == "_" || $0 == "$" } ?? false
            && string.allSatisfy { $0.isLetter || $0.isNumber || "_-.$".contains($0) }
            && !reserved.contains(string.lowercased())
        return plain ? string : JSONWriter.string(.string(string))
    }
}
