import SinkiPlan

/// The versions each side last wrote that nobody knowingly replaced or deleted since, each with the
/// places it may be found at the end: its path, the paths a user or peer renamed it to, and the
/// conflict copies made of it. A copy elsewhere with the same bytes does not count: a peer's copy of
/// a file must not stand in for the file.
struct Owed {
    private(set) var versions: [(content: ContentHash, places: Set<Int>)] = []

    mutating func owe(_ content: ContentHash?, at place: Int) {
        guard let content else { return }
        versions.append((content, [place]))
    }

    /// The version at `place` was replaced or deleted by someone who saw it, or dropped by its rule.
    mutating func release(_ content: ContentHash?, at place: Int) {
        guard let content else { return }
        versions.removeAll { $0.content == content && $0.places.contains(place) }
    }

    /// What was at `from` may now be found at `to` (a rename, or a conflict copy).
    mutating func move(from: Int, to: Int) {
        for index in versions.indices where versions[index].places.contains(from) { versions[index].places.insert(to) }
    }

    /// Versions someone removed from a path (deleted, replaced, renamed away): they must not be found
    /// there at the end, or a delete or an edit was undone.
    private(set) var gone: [(content: ContentHash, place: Int)] = []
    /// Paths whose removed versions may come back.
    var unchecked: Set<Int> = []

    /// Versions this agent saved at the server, or wrote on disk (tag `.none`), without recording
    /// the answer (a kill between the write and its transaction). Replaced there twice before the agent reads the feed, which keeps only
    /// the latest version, the agent cannot tell them from local edits, and sends them again: they
    /// may come back, unless the agent saw a version that names them (`seen`).
    private(set) var unacknowledged: [(content: ContentHash, place: Int, tag: ChangeTag)] = []
    /// Unacknowledged saves the agent then read at the server (the lost answer, late): the ingest
    /// records the agreement, so these must not come back.
    private var seen: [(content: ContentHash, place: Int, tag: ChangeTag)] = []

    mutating func unacknowledged(_ content: ContentHash?, at place: Int, tag: ChangeTag) {
        guard let content else { return }
        unacknowledged.append((content, place, tag))
    }

    /// Remote read `entry` at `place` (the feed, or a save's answer).
    mutating func read(_ entry: RemoteEntry, at place: Int) {
        for version in unacknowledged where version.place == place {
            if entry.tag == version.tag { seen.append(version) }
        }
    }

    mutating func forbid(_ content: ContentHash?, at place: Int) {
        guard let content else { return }
        gone.append((content, place))
    }

    /// The version was put back at the path by someone (a rename or copy into it).
    mutating func allow(_ content: ContentHash?, at place: Int) {
        guard let content else { return }
        gone.removeAll { $0.content == content && $0.place == place }
    }

    /// A removed version found where it was removed from.
    func firstResurrected(in disk: [DiskItem?]) -> (ContentHash, Int)? {
        gone.first { removed in
            // Each write on its own: reading a later save of the same bytes does not undo the excuse
            // of an earlier write the agent never learnt of.
            let unread = unacknowledged.contains { version in
                version.content == removed.content && version.place == removed.place && !seen.contains { $0 == version }
            }
            return !unchecked.contains(removed.place) && !unread && disk[removed.place].flatMap { World.content(of: $0.node) } == removed.content
        }.map { ($0.content, $0.place) }
    }

    /// A version found at none of its places.
    func firstLost(in disk: [DiskItem?]) -> ContentHash? {
        versions.first { version in
            !version.places.contains { disk[$0].flatMap { World.content(of: $0.node) } == version.content }
        }?.content
    }
}
