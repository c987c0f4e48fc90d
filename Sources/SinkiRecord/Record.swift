/// One content-defined chunk of a large file: the SHA-256 of its bytes (64 lowercase hex digits) and
/// its size. Chunks are held per user on the server, named by their hash (docs/chunking.md).
public struct ChunkRef: Sendable, Hashable {
    public var sha256: String
    public var size: Int64

    public init(sha256: String, size: Int64) {
        self.sha256 = sha256
        self.size = size
    }
}

/// A large file's content, uploaded separately and referenced from its record. Two forms:
///
/// - a **manifest** (`chunks` set): the file is its chunks in order; `id` and `sha256` are both the
///   manifest's hash (docs/chunking.md, "Manifests"), and `GET /v1/assets/ID` serves the file whole;
/// - a finished **tus upload** (`chunks` nil): `id` is the upload's id, `sha256` the file's SHA-256.
///   Records saved before chunking carry this form; agents still read them.
public struct Asset: Sendable, Equatable {
    public var id: String
    public var size: Int64
    public var sha256: String
    /// The manifest: ordered chunks whose sizes add up to `size`; nil for an upload asset.
    public var chunks: [ChunkRef]?

    public init(id: String, size: Int64, sha256: String, chunks: [ChunkRef]? = nil) {
        self.id = id
        self.size = size
        self.sha256 = sha256
        self.chunks = chunks
    }

    /// A manifest asset: its id is its hash.
    public init(manifestHash: String, chunks: [ChunkRef]) {
        self.init(id: manifestHash, size: chunks.reduce(0) { $0 + $1.size }, sha256: manifestHash, chunks: chunks)
    }

    /// Whether the content is a manifest of chunks (else one tus upload).
    public var isManifest: Bool { chunks != nil }
}

/// What a record stands for on disk, read from its `type`.
public enum RecordKind: Sendable, Equatable {
    case file
    case directory
    case symlink
}

/// One synced path, as FileSinki keeps one CloudKit record per path (design §2).
public struct Record: Sendable, Equatable {
    /// Type of a directory record.
    public static let directoryType = "dir"
    /// Type of a symbolic link record; `data` holds the link's target text.
    public static let symlinkType = "symlink"
    /// Type of a file whose writer had no merge rule for it.
    public static let defaultType = "keep-both"

    public var path: String
    /// The merge type: the rule chosen by extension at the writer, or `dir` / `symlink`.
    public var type: String
    /// Content inline, zlib-compressed.
    public var data: [UInt8]?
    public var asset: Asset?
    public var deleted: Bool
    /// The server's version of the record; 0 before the first save.
    public var changeTag: Int64
    /// The changeTag the writer's edit started from; 0 for a path new to the writer.
    public var baseTag: Int64
    public var size: Int64
    /// Lowercase hex SHA-256 of the content; empty for directories and tombstones.
    public var sha256: String
    public var mode: UInt32
    /// Nanoseconds since the Unix epoch.
    public var modifiedAt: Int64
    public var device: String
    /// The path this content was renamed from: the server copies the content of the record there,
    /// and a peer that has that file unchanged renames it instead of writing it again.
    public var movedFrom: String?
    /// Its extended attributes in the `user.` namespace (`xattrs`; empty: none, and the field is left out).
    public var xattrs = ExtendedAttributes.none
    /// Set by the server on a record whose manifest names a chunk it no longer holds (removed as
    /// damaged): a device that holds the content sends it again; the others wait for that version.
    /// Never stored as sent: the server says it as it answers.
    public var incomplete = false

    public init(path: String, type: String = Record.defaultType, data: [UInt8]? = nil, asset: Asset? = nil,
                deleted: Bool = false, changeTag: Int64 = 0, baseTag: Int64 = 0, size: Int64 = 0,
                sha256: String = "", mode: UInt32 = 0o644, modifiedAt: Int64 = 0, device: String = "",
                movedFrom: String? = nil) {
        self.path = path
        self.type = type
        self.data = data
        self.asset = asset
        self.deleted = deleted
        self.changeTag = changeTag
        self.baseTag = baseTag
        self.size = size
        self.sha256 = sha256
        self.mode = mode
        self.modifiedAt = modifiedAt
        self.device = device
        self.movedFrom = movedFrom
    }

    public var kind: RecordKind {
        switch type {
        case Record.directoryType: return .directory
        case Record.symlinkType: return .symlink
        default: return .file
        }
    }

    /// The stable id of the path, so that two machines creating the same path meet at one record.
    public var recordName: String { RecordName.of(path) }

    /// The same record without its inline content (for acknowledgements and listings).
    public var withoutData: Record {
        var copy = self
        copy.data = nil
        return copy
    }

    /// Whether two records describe the same content at the same path (ignoring tags, writer, mode and
    /// extended attributes).
    public func sameContent(as other: Record) -> Bool {
        path == other.path && deleted == other.deleted && kind == other.kind
            && (deleted || (sha256 == other.sha256 && size == other.size))
    }
}

/// Derives record names from paths.
public enum RecordName {
    /// 32 hex digits of FNV-1a-128 over the path's UTF-8: stable, case-sensitive, and computable by any
    /// peer without a crypto library. Not a security boundary: the server keys records by path too.
    public static func of(_ path: String) -> String {
        // FNV-1a 128-bit, using the standard prime 2^88 + 2^8 + 0x3b.
        var high: UInt64 = 0x6c62272e07bb0142
        var low: UInt64 = 0x62b821756295c58d
        for byte in path.utf8 {
            low ^= UInt64(byte)
            // (high, low) *= 2^88 + 0x13b
            let lowTimesSmall = low.multipliedFullWidth(by: 0x13b)
            let highTimesSmall = high &* 0x13b
            let shifted = low << 24 // low * 2^88 lands in high at bit 24
            high = highTimesSmall &+ lowTimesSmall.high &+ shifted
            low = lowTimesSmall.low
        }
        let hex = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(32)
        for word in [high, low] {
            for shift in stride(from: 60, through: 0, by: -4) { out.append(hex[Int(word >> UInt64(shift) & 15)]) }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
