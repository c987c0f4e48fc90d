/// A `Content-Type` as the routes compare it: its type and subtype, without parameters.
public enum MediaType {
    /// `application/json` of `Application/JSON; charset=utf-8`: what is before the first `;`, without
    /// spaces and tabs around it, lowercased; nil for no header, or an empty one.
    public static func essence(of value: String?) -> String? {
        value?.split(separator: ";", maxSplits: 1).first.map { String($0).trimmingSpaces.lowercased() }
    }
}

extension String {
    /// The string without leading and trailing spaces and tabs.
    public var trimmingSpaces: String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(self[first...last])
    }
}
