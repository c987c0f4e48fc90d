import SinkiRecord

/// Typed reads of an object's members, each failure a `badResponse`/`badRequest` naming the field.
struct JSONFields {
    let value: JSONValue
    let what: String
    let code: ControlError.Code

    init(_ value: JSONValue, what: String, code: ControlError.Code = .badResponse) {
        self.value = value
        self.what = what
        self.code = code
    }

    func fail(_ key: String, _ problem: String) -> ControlError {
        ControlError(code, "\(what).\(key): \(problem)")
    }

    func has(_ key: String) -> Bool {
        if case .some(.null) = value[key] { return false }
        return value[key] != nil
    }

    func string(_ key: String) throws(ControlError) -> String {
        guard case let .string(text)? = value[key] else { throw fail(key, "expected a string") }
        return text
    }

    func optionalString(_ key: String) throws(ControlError) -> String? {
        has(key) ? try string(key) : nil
    }

    func int(_ key: String) throws(ControlError) -> Int64 {
        guard case let .int(number)? = value[key] else { throw fail(key, "expected an integer") }
        return number
    }

    func optionalInt(_ key: String) throws(ControlError) -> Int64? {
        has(key) ? try int(key) : nil
    }

    func double(_ key: String) throws(ControlError) -> Double {
        switch value[key] {
        case let .int(number)?: return Double(number)
        case let .double(number)?: return number
        default: throw fail(key, "expected a number")
        }
    }

    func bool(_ key: String) throws(ControlError) -> Bool {
        guard case let .bool(flag)? = value[key] else { throw fail(key, "expected true or false") }
        return flag
    }

    func optionalBool(_ key: String) throws(ControlError) -> Bool? {
        has(key) ? try bool(key) : nil
    }

    func array(_ key: String) throws(ControlError) -> [JSONValue] {
        guard case let .array(items)? = value[key] else { throw fail(key, "expected an array") }
        return items
    }

    func object(_ key: String) throws(ControlError) -> JSONFields {
        guard case .object? = value[key] else { throw fail(key, "expected an object") }
        return JSONFields(value[key]!, what: "\(what).\(key)", code: code)
    }

    /// A time written as RFC 3339 UTC, as nanoseconds since the epoch.
    func time(_ key: String) throws(ControlError) -> Int64 {
        guard let nanoseconds = Timestamp.parse(try string(key)) else { throw fail(key, "expected an RFC 3339 UTC time") }
        return nanoseconds
    }

    func optionalTime(_ key: String) throws(ControlError) -> Int64? {
        has(key) ? try time(key) : nil
    }
}

extension JSONValue {
    /// An optional time as RFC 3339 UTC text, or null.
    static func time(_ nanoseconds: Int64?) -> JSONValue {
        nanoseconds.map { .string(Timestamp.format($0)) } ?? .null
    }

    static func optional(_ text: String?) -> JSONValue { text.map { .string($0) } ?? .null }
    static func optional(_ number: Int64?) -> JSONValue { number.map { .int($0) } ?? .null }
    static func optional(_ flag: Bool?) -> JSONValue { flag.map { .bool($0) } ?? .null }
}
