import Foundation
import SinkiRecord

/// The part of JSON Schema that docs/status.schema.json uses: `type` (one or a list), `properties`,
/// `required`, `additionalProperties: false`, `items`, `enum`, `minimum`, `format: date-time`.
/// A keyword it does not know fails validation, so the schema cannot quietly say more than is checked.
public struct JSONSchema: Sendable {
    public let root: JSONValue

    public init(file path: String) throws {
        root = try JSONValue.parse(Array(try Data(contentsOf: URL(fileURLWithPath: path))))
    }

    /// Every way `value` breaks the schema, as `location: problem` lines; empty when it conforms.
    public func problems(_ value: JSONValue) -> [String] {
        var out: [String] = []
        check(value, against: root, at: "$", into: &out)
        return out
    }

    static let known: Set<String> = ["$schema", "title", "description", "type", "properties", "required", "additionalProperties",
                                     "items", "enum", "minimum", "format"]

    private func check(_ value: JSONValue, against schema: JSONValue, at location: String, into out: inout [String]) {
        guard case let .object(members) = schema else { out.append("\(location): schema is not an object"); return }
        for (key, _) in members where !Self.known.contains(key) { out.append("\(location): schema keyword \(key) is not checked") }
        if let type = schema["type"] {
            var allowed: [String] = []
            if case let .string(one) = type { allowed = [one] }
            if case let .array(many) = type { allowed = many.compactMap { if case let .string(name) = $0 { name } else { nil } } }
            guard allowed.contains(Self.typeName(value)) || (allowed.contains("number") && Self.typeName(value) == "integer") else {
                out.append("\(location): \(Self.typeName(value)) is not \(allowed.joined(separator: " or "))")
                return
            }
        }
        if case .null = value { return }
        if case let .array(options)? = schema["enum"], !options.contains(value) { out.append("\(location): \(value) is not one of \(options)") }
        if let minimum = schema["minimum"], let number = Self.number(value), let floor = Self.number(minimum), number < floor {
            out.append("\(location): \(number) is below \(floor)")
        }
        if case .string("date-time")? = schema["format"], case let .string(text) = value,
           text.range(of: #"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$"#, options: .regularExpression) == nil {
            out.append("\(location): \(text) is not an RFC 3339 UTC time")
        }
        if case let .object(fields) = value {
            let properties: [(String, JSONValue)]
            if case let .object(list)? = schema["properties"] { properties = list } else { properties = [] }
            if case let .array(required)? = schema["required"] {
                for case let .string(name) in required where !fields.contains(where: { $0.0 == name }) {
                    out.append("\(location): \(name) is missing")
                }
            }
            for (name, field) in fields {
                if let sub = properties.first(where: { $0.0 == name })?.1 {
                    check(field, against: sub, at: "\(location).\(name)", into: &out)
                } else if case .bool(false)? = schema["additionalProperties"] {
                    out.append("\(location): \(name) is not in the schema")
                }
            }
        }
        if case let .array(items) = value, let itemSchema = schema["items"] {
            for (index, item) in items.enumerated() { check(item, against: itemSchema, at: "\(location)[\(index)]", into: &out) }
        }
    }

    static func typeName(_ value: JSONValue) -> String {
        switch value {
        case .null: "null"
        case .bool: "boolean"
        case .int: "integer"
        case .double: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    static func number(_ value: JSONValue) -> Double? {
        switch value {
        case let .int(number): Double(number)
        case let .double(number): number
        default: nil
        }
    }
}

/// The repository's top folder, found from a test source file's path.
public func repositoryRoot(_ file: String = #filePath) -> String {
    var url = URL(fileURLWithPath: file).deletingLastPathComponent()
    while url.path != "/" {
        if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url.path }
        url.deleteLastPathComponent()
    }
    fatalError("no Package.swift above \(file)")
}
