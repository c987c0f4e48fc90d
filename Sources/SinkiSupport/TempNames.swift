/// Names sinkid gives its own temporary files; they are never synced or reported as changes.
public enum TempNames {
    public static let prefix = ".sinki-tmp-"

    public static func isTemporary(_ name: Substring) -> Bool { name.hasPrefix(prefix) }
    public static func isTemporary(_ name: String) -> Bool { name.hasPrefix(prefix) }

    /// A fresh temporary name for a file about to replace `name`.
    public static func make(for name: String) -> String {
        var generator = SystemRandomNumberGenerator()
        return prefix + String(UInt64.random(in: 0...UInt64.max, using: &generator), radix: 36)
    }
}
