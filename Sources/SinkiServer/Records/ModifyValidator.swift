import SinkiRecord
import SinkiSupport

/// The protocol's rules for one item of a modify batch: the path safety floor, and inline content that
/// inflates to exactly `size` bytes whose SHA-256 is `sha256`. Pure and thread-safe; it runs before the
/// store's transaction so that the transaction holds the writer only for the writes.
struct ModifyValidator: Sendable {
    /// Largest inflated size accepted for inline content: `size` decides how much memory inflating
    /// takes, so a record cannot make the server allocate more than this.
    let maxInlineBytes: Int
    /// Size and SHA-256 of the writer's finished upload with this id (nil: none such), for records whose
    /// content is an `asset`.
    var assetFacts: @Sendable (String) -> (size: Int64, sha256: String)? = { _ in nil }

    func check(_ record: Record) -> Result<CheckedRecord, Problem> {
        let path: RecordPath
        do {
            path = try RecordPath(validating: record.path)
        } catch {
            return .failure(Problem(.badPath, detail: error.description))
        }
        guard record.size >= 0 else {
            return .failure(Problem(.badRequest, detail: "record \(quoted(record.path)) has a negative size"))
        }
        if let asset = record.asset, !record.deleted {
            guard record.data == nil else {
                return .failure(Problem(.badRequest, detail: "record \(quoted(record.path)) carries both data and an asset"))
            }
            guard asset.size == record.size, asset.sha256.lowercased() == record.sha256.lowercased() else {
                return .failure(Problem(.badRequest, detail: "the asset of \(quoted(record.path)) has size \(asset.size) and SHA-256 \(quoted(asset.sha256)); "
                                        + "the record says \(record.size) and \(quoted(record.sha256))"))
            }
            guard let facts = assetFacts(asset.id) else {
                return .failure(Problem(.badRequest, detail: "the asset of \(quoted(record.path)) names \(quoted(asset.id)), which is no finished upload of yours"))
            }
            guard facts.size == asset.size, facts.sha256 == asset.sha256.lowercased() else {
                return .failure(Problem(.badRequest, detail: "upload \(asset.id) has \(facts.size) bytes with SHA-256 \(facts.sha256); "
                                        + "the asset of \(quoted(record.path)) says \(asset.size) and \(quoted(asset.sha256))"))
            }
        }
        if let data = record.data, !record.deleted {
            guard record.size <= maxInlineBytes else {
                return .failure(Problem(.tooLarge, detail: "record \(quoted(record.path)) declares \(record.size) bytes inline; "
                                        + "the server takes at most \(maxInlineBytes) inline (send larger files as an asset)"))
            }
            let content: [UInt8]
            do {
                content = try Deflate.decompress(data, expectedSize: Int(record.size))
            } catch {
                return .failure(Problem(.badRequest, detail: "the data of \(quoted(record.path)) does not inflate to its size: \(error)"))
            }
            let digest = Digest.sha256Hex(content)
            guard digest == record.sha256.lowercased() else {
                return .failure(Problem(.badRequest, detail: "the data of \(quoted(record.path)) has SHA-256 \(digest), the record says \(quoted(record.sha256))"))
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
}
