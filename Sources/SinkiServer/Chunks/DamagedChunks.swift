import Glibc
import SinkiRecord
import SinkiSupport

/// Chunks removed as damaged (issue 24 item 2): until bytes of that name come in again, a record whose
/// manifest names one is `incomplete` whenever the server hands it out, so that a device holding the
/// content sends it again and the others wait for that version instead of failing to fetch it.
///
/// On disk, beside the chunks: `KEY/damaged/HASH`, an empty marker per chunk removed, made before the
/// chunk goes and removed when a chunk of that name is stored again (or by garbage collection once no
/// live record names it). Shared by every server on the chunks folder, as the chunks are.
extension ChunkStore {
    private func damagedFolder(_ user: String) -> String { userFolder(user) + "/damaged" }

    /// The chunk is about to be removed as damaged.
    func noteDamaged(user: String, chunk name: String) throws(SystemError) {
        let folder = damagedFolder(user)
        if mkdir(folder, 0o700) != 0 && errno != EEXIST { throw SystemError("mkdir", errno: errno, path: folder) }
        _ = try FileDescriptor.open(folder + "/" + name, flags: O_WRONLY | O_CREAT, mode: 0o600)
    }

    /// Bytes of that name are the user's chunk again.
    func clearDamaged(user: String, chunk name: String) {
        unlink(damagedFolder(user) + "/" + name)
    }

    /// The chunks of `user` removed as damaged and not stored since.
    func damaged(user: String) -> Set<String> {
        guard let names = try? FileDescriptor.open(damagedFolder(user), flags: O_RDONLY | O_DIRECTORY).listDirectory().names else { return [] }
        return Set(names.filter(Self.isName))
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
    func removeDamagedMarkers(user: String, referenced: Set<String>) {
        for name in damaged(user: user) where !referenced.contains(name) { clearDamaged(user: user, chunk: name) }
    }
}
