import SinkiRecord
import SinkiSupport

/// Chunks removed as damaged (issue 24 item 2): until bytes of that name come in again, a record whose
/// manifest names one is `incomplete` whenever the server hands it out, so that a device holding the
/// content sends it again and the others wait for that version instead of failing to fetch it.
///
/// Kept in the user's index (`ChunkIndex`, table `damaged`), noted in the transaction that removes the
/// chunk and cleared by the one that stores a chunk of that name again (or by garbage collection once
/// no live record names it). Shared by every server on the chunks folder, as the chunks are.
extension ChunkStore {
    /// The chunks of `user` removed as damaged and not stored since.
    func damaged(user: String) -> Set<String> {
        guard let index = try? index(user), let names = try? index.damaged() else { return [] }
        return Set(names.map { Hex.encode($0) })
    }

    /// Marks the records whose manifests name a chunk removed as damaged: one look at the user's
    /// markers when some record is a manifest, none otherwise.
    func flagIncomplete(_ records: inout [Record], user: String) {
        guard records.contains(where: { $0.asset?.isManifest == true && !$0.deleted }) else { return }
        let damaged = damaged(user: user)
        guard !damaged.isEmpty else { return }
        for index in records.indices where !records[index].deleted {
            if records[index].asset?.chunks?.contains(where: { damaged.contains($0.sha256) }) == true { records[index].incomplete = true }
        }
    }

    /// Garbage collection: markers of chunks no live record names (a record never names a chunk the
    /// user does not hold, so none will) go.
    func removeDamagedMarkers(_ index: ChunkIndex, referenced: Set<String>) throws {
        try index.clearDamaged(try index.damaged().filter { !referenced.contains(Hex.encode($0)) })
    }
}
