import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// Every folder's digests as the definition gives them (docs/protocol.md, "Digests"), computed from
/// scratch from a listing of one user's records, apart from the stores' incremental `FolderDeltas`:
/// keyed by folder path, with the folder each is in.
func expectedDigests(of records: [Record]) -> [String: (folder: FolderDigest, parent: String?)] {
    var folders: [String: (digest: TreeDigest, direct: TreeDigest, head: Int64, parent: String?)] = [:]
    for record in records {
        let parts = record.path.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        let entry = record.deleted ? TreeDigest.empty : TreeDigest.entry(path: record.path, contentID: record.sha256)
        for depth in parts.indices.dropFirst() {
            let folder = parts[..<depth].joined(separator: "/")
            var row = folders[folder] ?? (.empty, .empty, 0, depth == 1 ? nil : parts[..<(depth - 1)].joined(separator: "/"))
            row.digest ^= entry
            if depth == parts.count - 1 { row.direct ^= entry }
            row.head = max(row.head, record.changeTag)
            folders[folder] = row
        }
    }
    var out: [String: (folder: FolderDigest, parent: String?)] = [:]
    for (path, row) in folders {
        out[path] = (FolderDigest(path: path, digest: row.digest.hex, direct: row.direct.hex, head: row.head), row.parent)
    }
    return out
}

/// Bytewise, as the store orders paths.
func bytewise(_ lhs: String, _ rhs: String) -> Bool { lhs.utf8.lexicographicallyPrecedes(rhs.utf8) }

/// The store's answers (children listed) for every folder the user's records are in, by folder.
func storedDigests(_ store: any RecordStore, user: String) throws -> [String: DigestReply] {
    var out: [String: DigestReply] = [:]
    for path in expectedDigests(of: try allRecords(store, user: user)).keys {
        out[path] = try store.digests(user: user, folder: path, children: true)
    }
    return out
}

/// Checks every folder the user's records are in against the definition: the store's digests, head and
/// children equal those computed from its own listing.
func expectStoredDigestsMatchRecords(_ store: any RecordStore, user: String, _ comment: Comment,
                                     sourceLocation: SourceLocation = #_sourceLocation) throws {
    let expected = expectedDigests(of: try allRecords(store, user: user))
    for (path, row) in expected {
        let reply = try store.digests(user: user, folder: path, children: true)
        let children = expected.filter { $0.value.parent == path }.map(\.value.folder).sorted { bytewise($0.path, $1.path) }
        #expect(reply == DigestReply(folder: row.folder, children: children), "\(comment) user \(user), folder \(path)",
                sourceLocation: sourceLocation)
    }
}

/// Every record of the user, tombstones included.
func allRecords(_ store: any RecordStore, user: String) throws -> [Record] {
    let listing = try store.records(user: user, prefix: nil, after: nil, limit: PageLimit(records: 100_000, dataBytes: 1 << 30),
                                    includeData: false)
    guard !listing.more else { throw ClientError(description: "more than 100,000 records of \(user)") }
    return listing.records
}

/// Seeded random modify batches for one store: saves, edits, deletes, re-creations, folders, moves (the
/// source deleted in the same batch, or kept), stale edits and moves whose source is gone, for several
/// users, in nested folders with siblings that share a name's start (`b`, `b-x`, `b.y`: a prefix match
/// on text would mix them up), a space and a letter beyond ASCII.
struct DigestWorkload {
    static let users = ["alice", "bob", "carol"]
    private static let roots = ["A", "B"]
    private static let names = ["a", "b", "b-x", "b.y", "Z", "\u{e9}", "sub dir"]

    var random: SeededRandom

    init(seed: UInt64) { random = SeededRandom(seed: seed) }

    /// One batch for a random user, from what the store holds now: the user and the items.
    mutating func batch(from store: any RecordStore) throws -> (user: String, items: [Record]) {
        let user = Self.users[random.below(Self.users.count)]
        let held = try allRecords(store, user: user)
        let live = held.filter { !$0.deleted }
        let gone = held.filter(\.deleted)
        var tags = Dictionary(held.map { ($0.path, $0.changeTag) }, uniquingKeysWith: max)
        var items: [Record] = []
        for _ in 0..<random.int(in: 1...12) {
            switch random.weighted([5, 3, 2, 2, 1, 2, 1]) {
            case 0: // a new file, or a stale save of a held one
                let path = newPath()
                items.append(fileRecord(path, random.bytes(random.int(in: 0...40)), baseTag: tags[path] ?? 0))
            case 1 where !live.isEmpty: // an edit
                let path = live[random.below(live.count)].path
                items.append(fileRecord(path, random.bytes(8), baseTag: tags[path] ?? 0))
            case 2 where !live.isEmpty: // a delete
                let path = live[random.below(live.count)].path
                items.append(tombstone(path, baseTag: tags[path] ?? 0))
            case 3 where !gone.isEmpty: // a re-creation
                let path = gone[random.below(gone.count)].path
                items.append(fileRecord(path, random.bytes(5), baseTag: tags[path] ?? 0))
            case 4: // a folder record: content id empty
                let path = newPath()
                items.append(Record(path: path, type: "dir", baseTag: tags[path] ?? 0, mode: 0o755, device: "laptop"))
            case 5 where !live.isEmpty: // a move, the source deleted with it or (rarely) kept
                let source = live[random.below(live.count)]
                let target = newPath()
                items.append(Record(path: target, type: source.type, baseTag: tags[target] ?? 0, size: source.size, sha256: source.sha256,
                                    device: "laptop", movedFrom: source.path))
                if random.chance(0.8) { items.append(tombstone(source.path, baseTag: tags[source.path] ?? 0)) }
                tags[source.path] = nil
            case 6: // a move whose source holds other content: refused
                items.append(Record(path: newPath(), size: 3, sha256: Digest.sha256Hex([1, 2, 3]), device: "laptop",
                                    movedFrom: live.first?.path ?? "A/nothing"))
            default:
                continue
            }
        }
        return (user, items)
    }

    private mutating func newPath() -> String {
        var parts = [Self.roots[random.below(Self.roots.count)]]
        for _ in 0..<random.int(in: 1...4) { parts.append(Self.names[random.below(Self.names.count)]) }
        return parts.joined(separator: "/")
    }
}
