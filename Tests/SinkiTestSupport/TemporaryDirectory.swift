import Foundation
import Synchronization

/// A fresh directory under the system temporary folder, removed when the owner lets go of it.
public final class TemporaryDirectory: Sendable {
    public let path: String
    private let kept = Atomic<Bool>(false)

    public init(_ label: String = "sinki-test") {
        let template = NSTemporaryDirectory() + "/\(label)-XXXXXX"
        var bytes = Array(template.utf8CString)
        guard let made = mkdtemp(&bytes) else { fatalError("mkdtemp failed: \(String(cString: strerror(errno)))") }
        path = String(cString: made)
    }

    /// Kept when `keep()` was called, or for every test with `SINKI_KEEP_TEST_FILES=1` (logs and roots
    /// to look at after a failure).
    deinit {
        if kept.load(ordering: .relaxed) || ProcessInfo.processInfo.environment["SINKI_KEEP_TEST_FILES"] == "1" { return }
        try? FileManager.default.removeItem(atPath: path)
    }

    /// Leaves the directory in place when its owner lets go (to look at after a failure).
    public func keep() { kept.store(true, ordering: .relaxed) }

    /// A path inside the directory (not created).
    public func child(_ name: String) -> String { path + "/" + name }
}
