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

    /// A version found at none of its places.
    func firstLost(in disk: [DiskItem?]) -> ContentHash? {
        versions.first { version in
            !version.places.contains { disk[$0].flatMap { World.content(of: $0.node) } == version.content }
        }?.content
    }
}
