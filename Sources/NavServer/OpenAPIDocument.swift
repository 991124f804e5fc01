import NavigationCore

/// `openapi.yaml` for the features a server hosts: the repository's hand-written document with
/// its generated part (the typed contract) made from the same declarations the server decodes
/// state with, so the schemas cannot promise what the server does not do.
///
/// The generated part is the region between two marker comments at the end of
/// `components.schemas`: `FeatureName` (every screen that can appear), `CreateSessionRequest`
/// (one variant per hostable feature, `feature` its discriminator) and a `<Feature>State` for
/// every screen's state, with one component per enum in it. `navd openapi` writes the demo
/// features' document, which is the committed `openapi.yaml`; a server hosting other features
/// serves its own.
public enum OpenAPIDocument {
    static let beginMarker = "    # BEGIN generated from the hosted features' declarations by `swift run navd openapi --output openapi.yaml`; do not edit by hand\n"
    static let endMarker = "    # END generated\n"

    /// `template` with its generated region replaced by `catalog`'s schemas; `template` as it is
    /// if it has no such region. Served by a server other than navd (`name`, at `version`), its
    /// `info` names that server, and says that the examples show navd's demo features.
    public static func render(_ template: String, for catalog: FeatureCatalog, servedBy name: String = "navd",
                              version: String = BuildInfo.version) -> String {
        let template = name == "navd" ? template : retitled(template, name: name, version: version)
        guard let begin = range(of: beginMarker, in: template, from: template.startIndex),
              let end = range(of: endMarker, in: template, from: begin.upperBound) else { return template }
        return String(template[..<begin.upperBound]) + YAMLWriter.mapping(schemas(for: catalog), indent: 4)
            + String(template[end.lowerBound...])
    }

    static let titleLine = "  title: navd — navigation-state server\n"
    static let versionLine = "  version: \(BuildInfo.version)\n"
    static let descriptionLine = "  description: |\n"

    /// The template's `info` for a host's server: its title and version, and a first paragraph
    /// on what in the document is navd's rather than the host's.
    static func retitled(_ template: String, name: String, version: String) -> String {
        var text = template
        func replace(_ line: String, with replacement: String) {
            guard let found = range(of: line, in: text, from: text.startIndex) else { return }
            text.replaceSubrange(found, with: replacement)
        }
        replace(titleLine, with: "  title: \(YAMLWriter.scalar("\(name) — navigation-state server on navd \(BuildInfo.version)"))\n")
        replace(versionLine, with: "  version: \(YAMLWriter.scalar(version))\n")
        replace(descriptionLine, with: descriptionLine + """
                This server hosts its own features: their names and state schemas are the generated
                components (`FeatureName`, `CreateSessionRequest`, `<Feature>State`). The examples
                elsewhere show navd's demo features (`counter`, `app`, …), and `navd_fact_fetches_total`
                is theirs.


            """)
        return text
    }

    /// Where `marker` (a whole line of ASCII) first occurs in `text` from `start`. A plain
    /// search: `firstRange(of:)` is the regex library's, and this one call linked all of it
    /// (1.1 MB of the statically linked binary, which the image's size limit cannot spare).
    static func range(of marker: String, in text: String, from start: String.Index) -> Range<String.Index>? {
        let needle = Array(marker.utf8)
        let bytes = text.utf8
        var index = start
        while index < bytes.endIndex {
            if bytes[index...].starts(with: needle) { return index..<bytes.index(index, offsetBy: needle.count) }
            index = bytes.index(after: index)
        }
        return nil
    }

    /// The generated components, in a stable order: the names, the session request, then each
    /// state as the walk from the hosts meets it.
    static func schemas(for catalog: FeatureCatalog) -> JSONObject {
        var builder = SchemaBuilder()
        let hosts = catalog.hosts.map(\.name)
        var components = JSONObject()
        components.append("FeatureName", [
            "type": "string",
            "description": "A screen's name as `GET /features` lists it: every screen that can appear.",
            "enum": .array(catalog.screens.map { .string($0.name) }),
        ])
        components.append("CreateSessionRequest", [
            "description": "A hostable feature (`GET /features`, `hostable: true`) and, optionally, a full or partial initial state (a deep link) of that feature's state schema; `feature` says which.",
            "oneOf": .array(hosts.map { SchemaBuilder.reference(sessionRequestName($0)) }),
            "discriminator": [
                "propertyName": "feature",
                "mapping": .object(JSONObject(hosts.map { ($0, .string(SchemaBuilder.path(sessionRequestName($0)))) })),
            ],
        ])
        for host in catalog.hosts {
            let state = builder.schema(.feature(host.screen))
            components.append(sessionRequestName(host.name), [
                "type": "object",
                "description": .string("A session of `\(host.name)`."),
                "required": ["feature"],
                "additionalProperties": false,
                "properties": [
                    "feature": ["type": "string", "const": .string(host.name)],
                    "state": [
                        "description": "A full or partial initial state (deep link); `null` or absent for the defaults.",
                        "anyOf": [state, ["type": "null"]],
                    ],
                ],
            ])
        }
        for screen in catalog.screens { _ = builder.schema(.feature(screen)) }
        for (name, schema) in builder.components.pairs { components.append(name, schema) }
        return components
    }

    static func sessionRequestName(_ feature: String) -> String {
        "Create" + SchemaBuilder.typeName(feature) + "Session"
    }
}

/// Turns state schemas into JSON Schema, adding a component for each screen's state and each
/// enum it meets; a screen that contains itself refers to its own component.
struct SchemaBuilder {
    private(set) var components = JSONObject()
    private var named = Set<String>()

    static func typeName(_ name: String) -> String { name.prefix(1).uppercased() + name.dropFirst() }
    static func path(_ component: String) -> String { "#/components/schemas/" + component }
    static func reference(_ component: String) -> JSON { ["$ref": .string(path(component))] }

    mutating func schema(_ schema: StateSchema, owner: String = "") -> JSON {
        switch schema {
        case .integer(let range):
            guard let range else { return ["type": "integer"] }
            return ["type": "integer", "minimum": .int(range.lowerBound), "maximum": .int(range.upperBound)]
        case .number(let range):
            guard let range else { return ["type": "number"] }
            return ["type": "number", "minimum": number(range.lowerBound), "maximum": number(range.upperBound)]
        case .boolean:
            return ["type": "boolean"]
        case .string(let allowed):
            guard let allowed else { return ["type": "string"] }
            return ["type": "string", "enum": .array(allowed.map(JSON.string))]
        case .optional(let wrapped):
            let inner = self.schema(wrapped, owner: owner)
            guard case .object(let object) = inner else { return inner }
            if object.isEmpty { return inner }
            if object.count == 1, case .string(let type)? = object["type"] { return ["type": [.string(type), "null"]] }
            return ["anyOf": [inner, ["type": "null"]]]
        case .array(let element):
            return ["type": "array", "items": self.schema(element, owner: owner)]
        case .oneOf(let enumName, let cases):
            let component = owner + Self.typeName(enumName)
            if named.insert(component).inserted {
                // Its place first, so a component comes before those it refers to.
                components.append(component, .null)
                let variants: [JSON] = cases.map { enumCase in
                    [
                        "type": "object",
                        "required": [.string(enumCase.name)],
                        "additionalProperties": false,
                        "properties": .object(JSONObject([(enumCase.name, self.schema(enumCase.payload, owner: owner))])),
                    ]
                }
                components[component] = [
                    "description": .string("An enum value: an object with exactly one key, the case (\(cases.map { "`\($0.name)`" }.joined(separator: ", ")))."),
                    "oneOf": .array(variants),
                ]
            }
            return Self.reference(component)
        case .feature(let screen):
            let component = Self.typeName(screen.name) + "State"
            if named.insert(component).inserted {
                components.append(component, .null)
                let owner = Self.typeName(screen.name)
                var properties = JSONObject()
                for field in screen.stateFields { properties.append(field.name, self.schema(field.schema, owner: owner)) }
                let children = screen.stateFields.filter(\.holdsChildren).map { "`\($0.name)`" }
                var description = "The state of `\(screen.name)`. Every field may be left out of a deep link (it takes its default)"
                description += children.isEmpty ? "." : "; a navigation node's `state` leaves out \(children.joined(separator: ", ")), which its child nodes show."
                components[component] = [
                    "type": "object",
                    "description": .string(description),
                    "additionalProperties": false,
                    "properties": .object(properties),
                ]
            }
            return Self.reference(component)
        case .anyArray:
            return ["type": "array"]
        case .anyObject:
            return ["type": "object"]
        case .any:
            return [:]
        }
    }

    /// A whole number as an integer (`0`, not `0.0`).
    private func number(_ value: Double) -> JSON {
        if value == value.rounded(), let exact = Int(exactly: value) { return .int(exact) }
        return .double(value)
    }
}
