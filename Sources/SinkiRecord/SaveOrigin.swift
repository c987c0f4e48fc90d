/// Which run of which agent saved a record (`Sinki-Origin` on a modify request), so that the change feed
/// it reads can leave its own saves out (`omitOrigin`): it learnt each from the save's answer. Made
/// afresh by every agent run, never the device name: two agents given one `--device`, or one agent
/// after a restart that may have lost answers, must still read each other's saves.
public struct SaveOrigin: Hashable, Sendable, CustomStringConvertible {
    public static let header = "Sinki-Origin"
    public static let query = "omitOrigin"

    public let text: String

    /// Accepts 16 to 64 characters of `[0-9a-z-]`; nil otherwise.
    public init?(validating text: String) {
        let bytes = text.utf8
        guard (16...64).contains(bytes.count),
              bytes.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || ($0 >= 0x61 && $0 <= 0x7A) || $0 == 0x2D }) else { return nil }
        self.text = text
    }

    public var description: String { text }
}
