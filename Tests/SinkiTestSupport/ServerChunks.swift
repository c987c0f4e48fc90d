import Foundation
import Glibc
import SinkiSupport

/// What a server's chunk folder (`DATA/chunks`) holds, read from outside the server the way an operator
/// would: each user's index (`KEY/index.db`) says where every chunk is, in a pack or in a file of its own
/// (docs/server.md, "Chunks"). Also changes it as time or a failing disk would.
public struct ServerChunks {
    /// A chunk as its user's index holds it.
    public struct Chunk: Equatable, Sendable {
        /// The file holding its bytes, and where they are in it.
        public var path: String
        public var offset: Int64
        public var size: Int64
        /// Whether it lives in a pack (else in a file of its own).
        public var packed: Bool
        /// Nanoseconds since the epoch when it was last stored or found present.
        public var touched: Int64
    }

    /// The chunks of the users read (one, or all: tests then use distinct content), by name.
    public var chunks: [String: Chunk] = [:]
    /// Pack files, and files of their own (the layout before packs), under the users read.
    public var packFiles = 0
    public var chunkFiles = 0
    /// Markers of narrowed tokens' uploads.
    public var markers = 0
    private var indexes: [String] = []

    /// Reads `folder`, only `user`'s chunks when given.
    public init(_ folder: String, user: String? = nil) {
        let keys = user.map { [Digest.sha256Hex(Array($0.utf8))] }
            ?? ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.utf8.count == 64 }
        for key in keys {
            let userFolder = folder + "/" + key
            let index = userFolder + "/index.db"
            if FileManager.default.fileExists(atPath: index), let database = try? SQLiteDatabase(path: index, readOnly: true) {
                indexes.append(index)
                try? database.query("SELECT name, pack, offset, size, touched FROM chunks") { row in
                    let name = Hex.encode(row.blob(0)), pack = row.text(1)
                    chunks[name] = Chunk(path: pack.isEmpty ? userFolder + "/" + name.prefix(2) + "/" + name : userFolder + "/packs/" + pack,
                                         offset: row.int64(2), size: row.int64(3), packed: !pack.isEmpty, touched: row.int64(4))
                }
                markers += Int((try? database.scalar("SELECT COUNT(*) FROM scoped")) ?? 0)
            }
            packFiles += ((try? FileManager.default.contentsOfDirectory(atPath: userFolder + "/packs")) ?? []).count
            for fanOut in (try? FileManager.default.contentsOfDirectory(atPath: userFolder)) ?? [] where fanOut.utf8.count == 2 {
                chunkFiles += ((try? FileManager.default.contentsOfDirectory(atPath: userFolder + "/" + fanOut)) ?? []).count
            }
        }
    }

    public var names: Set<String> { Set(chunks.keys) }

    /// The chunk's bytes as the server holds them; nil when it holds none.
    public func bytes(_ name: String) -> [UInt8]? {
        guard let chunk = chunks[name], let file = try? FileDescriptor.open(chunk.path, flags: O_RDONLY) else { return nil }
        var out = [UInt8](repeating: 0, count: Int(chunk.size))
        let got = out.withUnsafeMutableBytes { (try? file.read(into: $0, at: chunk.offset)) ?? 0 }
        return got == out.count ? out : nil
    }

    /// Puts `bytes` where the server keeps the chunk, as a failing disk would: over its bytes, and when
    /// they are of another length the index says that length (a copy cut short or grown).
    public func overwrite(_ name: String, with bytes: [UInt8]) throws {
        guard let chunk = chunks[name] else { throw CocoaError(.fileNoSuchFile) }
        let file = try FileDescriptor.open(chunk.path, flags: O_RDWR)
        let wrote = bytes.withUnsafeBytes { pwrite(file.raw, $0.baseAddress, $0.count, off_t(chunk.offset)) }
        guard wrote == bytes.count else { throw SystemError("pwrite", errno: errno, path: chunk.path) }
        if Int64(bytes.count) != chunk.size {
            try change { try $0.run("UPDATE chunks SET size = ? WHERE name = ?", Int64(bytes.count), Hex.decode(name) ?? []) }
        }
    }

    /// Flips one byte in the middle of the chunk where the server keeps it.
    public func damage(_ name: String) throws {
        guard var bytes = bytes(name) else { throw CocoaError(.fileNoSuchFile) }
        bytes[bytes.count / 2] ^= 0xff
        try overwrite(name, with: bytes)
    }

    /// Sets when the chunk was last stored or found present (and the markers of narrowed tokens'
    /// uploads of it) `seconds` into the past, as if that long ago.
    public func age(_ name: String, seconds: Int) throws {
        let then = Clock.now() - Int64(seconds) * 1_000_000_000
        let raw = Hex.decode(name) ?? []
        try change { database in
            try database.run("UPDATE chunks SET touched = ?, stored = MIN(stored, ?) WHERE name = ?", then, then, raw)
            try database.run("UPDATE scoped SET touched = ? WHERE name = ?", then, raw)
        }
    }

    /// Changes the indexes of the users read.
    private func change(_ body: (SQLiteDatabase) throws -> Void) throws {
        for index in indexes { try body(try SQLiteDatabase(path: index)) }
    }
}
