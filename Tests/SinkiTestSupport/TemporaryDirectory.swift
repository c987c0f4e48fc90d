import Foundation

/// A fresh directory under the system temporary folder, removed when the owner lets go of it.
public final class TemporaryDirectory: Sendable {
    public let path: String

    public init(_ label: String = "sinki-test") {
        let template = NSTemporaryDirectory() + "/\(label)-XXXXXX"
        var bytes = Array(template.utf8CString)
        guard let made = mkdtemp(&bytes) else { fatalError("mkdtemp failed: \(String(cString: strerror(errno)))") }
        path = String(cString: made)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// A path inside the directory (not created).
    public func child(_ name: String) -> String { path + "/" + name }
}
