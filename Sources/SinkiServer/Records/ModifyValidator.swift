import SinkiRecord
import SinkiSupport

/// The protocol's rules for one item of a modify batch: the path safety floor, inline content within
/// the inline limit, an upload asset the writer finished, and a manifest that is well formed and adds
/// up. Pure and thread-safe; it runs before the store's transaction so that the transaction holds the
/// writer only for the writes. Whether the manifest's chunks are held is checked at commit
/// (`ModifyRoute`), under the user's chunk lock.
///
/// Inline content is stored as given, neither inflated nor hashed: the receiving agent verifies it
/// and inflates no more than the record's declared size, so a hostile record cannot exhaust its
/// memory, and the server never needs to read content (design §3).
struct ModifyValidator: Sendable {
    /// Largest declared size accepted for inline content.
    let maxInlineBytes: Int
    /// Most chunks one manifest may name.
    var maxManifestChunks = ServerLimits().maxManifestChunks
    /// Largest file a manifest may describe: the server's largest upload (`Tus-Max-Size`).
    var maxManifestBytes: Int64 = UploadSettings().maxSize
    /// The token's `maxUploadBytes`, which a manifest's total size may not pass either.
    var tokenMaxBytes: Int64?
    /// Size and SHA-256 of the writer's finished upload with this id (nil: none such), for records whose
    /// content is an upload `asset`.
    var assetFacts: @Sendable (String) -> (size: Int64, sha256: String)? = { _ in nil }

    /// The most bytes zlib (RFC 1950) takes for `size` bytes of content, whatever the settings of the
    /// compressor that made it: deflate's worst case is fixed-Huffman blocks of literals at 9 bits a
    /// byte (1/8 over), and zlib's conservative bound (`deflateBound` for settings it does not know)
    /// adds 1/64 and a few bytes; 1 KiB more leaves room for the header, a dictionary id and flush
    /// markers. Compressed data past this does not inflate to `size` bytes, so it is refused unread.
    static func compressedBound(_ size: Int64) -> Int64 { size + size / 8 + size / 64 + 1024 }

    func check(_ sent: Record) -> Result<CheckedRecord, Problem> {
        // Whether chunks are missing is the server's to say as it answers, never a client's to store.
        var record = sent
        record.incomplete = false
        let path: RecordPath
        do {
            path = try RecordPath(validating: record.path)
        } catch {
            return .failure(Problem(.badPath, detail: error.description))
        }
        guard record.size >= 0 else {
            return .failure(Problem(.badRequest, detail: "record \(quoted(record.path)) has a negative size"))
        }
        if let problem = Self.fieldProblem(record) { return .failure(problem) }
        if let asset = record.asset, !record.deleted {
            guard record.data == nil else {
                return .failure(Problem(.badRequest, detail: "record \(quoted(record.path)) carries both data and an asset"))
            }
            if let problem = asset.isManifest ? checkManifest(record, asset) : checkUpload(record, asset) { return .failure(problem) }
        }
        if let data = record.data, !record.deleted {
            guard record.size <= maxInlineBytes else {
                return .failure(Problem(.tooLarge, detail: "record \(quoted(record.path)) declares \(record.size) bytes inline; "
                                        + "the server takes at most \(maxInlineBytes) inline (send larger files as an asset)"))
            }
            let bound = Self.compressedBound(record.size)
            guard Int64(data.count) <= bound else {
                return .failure(Problem(.badRequest, detail: "the data of \(quoted(record.path)) is \(data.count) bytes compressed, more than zlib "
                                        + "ever makes of the \(record.size) bytes the record declares (at most \(bound))"))
            }
        }
        if !record.deleted && record.kind != .directory && record.data == nil && record.asset == nil {
            // Content comes inline, as an asset, or copied from the record it was renamed from.
            guard let source = record.movedFrom else {
                if record.size == 0 { return .success(CheckedRecord(record, path: path)) }
                return .failure(Problem(.badRequest, detail: "record \(quoted(record.path)) has \(record.size) bytes but neither data, an asset nor movedFrom"))
            }
            do { _ = try RecordPath(validating: source) } catch {
                return .failure(Problem(.badPath, detail: "movedFrom: \(error.description)"))
            }
        }
        return .success(CheckedRecord(record, path: path))
    }

    /// Longest `device` name taken, in bytes.
    static let maxDeviceBytes = 128
    /// Whether a device name may travel to the user's other devices.
    static func isDeviceName(_ device: String) -> Bool {
        device.utf8.count <= maxDeviceBytes
            && !device.unicodeScalars.contains(where: { $0.properties.generalCategory == .control || $0 == "\u{2028}" || $0 == "\u{2029}" })
    }

    /// Longest `type` taken, in bytes.
    static let maxTypeBytes = 64

    /// `device` and `type` travel to every other device of the user, into its log lines and its merge
    /// rules: a device name is bounded and holds no control character (a newline in it split the
    /// receiver's log lines), a type is a short word (`keep-both`, `json`), never a path.
    static func fieldProblem(_ record: Record) -> Problem? {
        if !isDeviceName(record.device) {
            var problem = Problem(.badRequest, detail: "record \(quoted(record.path)): device must be at most \(maxDeviceBytes) bytes, "
                                  + "without control characters")
            problem.field = "device"
            return problem
        }
        if let problem = record.xattrs.problem {
            // The reader holds a record to the same bounds; this is for records built otherwise.
            return Problem(.badRequest, detail: "record \(quoted(record.path)): xattrs: \(problem)", field: "xattrs")
        }
        let type = record.type
        let word = type.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "+"):
                return true
            default:
                return false
            }
        }
        if type.utf8.count > maxTypeBytes || !word || type.hasPrefix(".") {
            var problem = Problem(.badRequest, detail: "record \(quoted(record.path)): type must be a word of at most \(maxTypeBytes) letters, "
                                  + "digits, '-', '_', '.' or '+', not starting with '.'")
            problem.field = "type"
            return problem
        }
        return nil
    }

    /// An upload asset names a finished upload of the writer with the record's size and SHA-256.
    private func checkUpload(_ record: Record, _ asset: Asset) -> Problem? {
        guard asset.size == record.size, asset.sha256.lowercased() == record.sha256.lowercased() else {
            return Problem(.badRequest, detail: "the asset of \(quoted(record.path)) has size \(asset.size) and SHA-256 \(quoted(asset.sha256)); "
                           + "the record says \(record.size) and \(quoted(record.sha256))")
        }
        guard let facts = assetFacts(asset.id) else {
            return Problem(.badRequest, detail: "the asset of \(quoted(record.path)) names \(quoted(asset.id)), which is no finished upload of yours")
        }
        guard facts.size == asset.size, facts.sha256 == asset.sha256.lowercased() else {
            return Problem(.badRequest, detail: "upload \(asset.id) has \(facts.size) bytes with SHA-256 \(facts.sha256); "
                           + "the asset of \(quoted(record.path)) says \(asset.size) and \(quoted(asset.sha256))")
        }
        return nil
    }

    /// A manifest (docs/chunking.md, "Manifests"): chunks named by 64 lowercase hex digits, each 1 byte
    /// to 2 MiB, adding up to the asset's size, which is the record's; its hash is the asset's id and
    /// `sha256`, and the record's `sha256` too for a file above `ContentID.wholeFileLimit`.
    private func checkManifest(_ record: Record, _ asset: Asset) -> Problem? {
        let chunks = asset.chunks ?? []
        let name = quoted(record.path)
        guard !chunks.isEmpty else {
            return Problem(.badRequest, detail: "the manifest of \(name) names no chunk (an empty file goes without content)")
        }
        guard chunks.count <= maxManifestChunks else {
            return Problem(.badRequest, detail: "the manifest of \(name) names \(chunks.count) chunks; one names at most \(maxManifestChunks)")
        }
        var total: Int64 = 0
        for (index, chunk) in chunks.enumerated() {
            guard ChunkStore.isName(chunk.sha256) else {
                return Problem(.badRequest, detail: "chunk \(index) of \(name) is named \(quoted(String(chunk.sha256.prefix(80)))), "
                               + "not a SHA-256 in 64 lowercase hex digits")
            }
            guard (1...ChunkStore.maxChunkBytes).contains(chunk.size) else {
                return Problem(.badRequest, detail: "chunk \(index) of \(name) (\(chunk.sha256)) has \(chunk.size) bytes; "
                               + "a chunk has 1 to \(ChunkStore.maxChunkBytes)")
            }
            total += chunk.size
        }
        guard total == asset.size, asset.size == record.size else {
            return Problem(.badRequest, detail: "the chunks of \(name) add up to \(total) bytes; its asset says \(asset.size) and the record \(record.size)")
        }
        guard total <= maxManifestBytes else {
            return Problem(.tooLarge, detail: "\(name) has \(total) bytes; the server takes files of at most \(maxManifestBytes)")
        }
        if let tokenMaxBytes, total > tokenMaxBytes {
            return Problem(.tooLarge, detail: "\(name) has \(total) bytes, over the token's maxUploadBytes \(tokenMaxBytes)", field: "maxUploadBytes")
        }
        let hash = ContentID.manifestHash(hex: chunks.map { ($0.sha256, $0.size) }) ?? ""
        guard asset.id == hash, asset.sha256 == hash else {
            return Problem(.badRequest, detail: "the manifest of \(name) hashes to \(hash); its asset's id is \(quoted(asset.id)) and sha256 \(quoted(asset.sha256))")
        }
        if ContentID.isManifest(size: record.size), record.sha256 != hash {
            return Problem(.badRequest, detail: "\(name) has \(record.size) bytes, over \(ContentID.wholeFileLimit), so its sha256 is its manifest's "
                           + "hash \(hash), not \(quoted(record.sha256))")
        }
        return nil
    }
}
