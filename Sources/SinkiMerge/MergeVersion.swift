import Glibc
import SinkiSupport

/// One side of a conflict: where its content is and the facts the rules compare.
public struct MergeVersion: Sendable, Equatable {
    /// Where a version's bytes are.
    public enum Content: Sendable, Equatable {
        case bytes([UInt8])
        /// An absolute path, opened without following a symlink at its end. The caller vouches that
        /// it is the version meant (the agent passes the local file it just checked, or a copy).
        case file(String)
        /// Nothing to read: a deleted side, or content the rule does not need.
        case none
    }

    public var content: Content
    public var size: Int64
    /// Nanoseconds since the Unix epoch.
    public var modifiedAt: Int64
    /// The device that wrote this version.
    public var device: String
    /// Lowercase hex SHA-256 of the content; empty when unknown (then it is not used to break ties).
    public var sha256: String
    public var deleted: Bool

    public init(content: Content, size: Int64, modifiedAt: Int64, device: String, sha256: String = "", deleted: Bool = false) {
        self.content = content
        self.size = size
        self.modifiedAt = modifiedAt
        self.device = device
        self.sha256 = sha256
        self.deleted = deleted
    }

    /// A version held in memory, its size and hash taken from the bytes.
    public static func bytes(_ bytes: [UInt8], modifiedAt: Int64, device: String) -> MergeVersion {
        MergeVersion(content: .bytes(bytes), size: Int64(bytes.count), modifiedAt: modifiedAt, device: device,
                     sha256: ContentID.of(bytes))
    }

    /// A deleted side (a tombstone, or a file deleted here).
    public static func deletion(modifiedAt: Int64, device: String) -> MergeVersion {
        MergeVersion(content: .none, size: 0, modifiedAt: modifiedAt, device: device, deleted: true)
    }

    /// The content's bytes; blocking when they are in a file.
    func read() throws(MergeInputError) -> [UInt8] {
        switch content {
        case let .bytes(bytes): return bytes
        case let .file(path):
            do {
                let file = try FileDescriptor.open(path, flags: O_RDONLY | O_NOFOLLOW)
                return try file.readAll(sizeHint: Int(clamping: size))
            } catch {
                throw MergeInputError(message: "cannot read \(error)")
            }
        case .none: throw MergeInputError(message: "no content was given")
        }
    }
}

/// A version's content could not be had.
struct MergeInputError: Error, CustomStringConvertible {
    var message: String
    var description: String { message }
}
