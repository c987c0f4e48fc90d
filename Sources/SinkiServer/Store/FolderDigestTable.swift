import SinkiRecord
import SinkiSupport

/// What both stores share of the folder digests they keep beside the records (docs/server.md, "Folder
/// digests"), so that only their dialects differ: the table and its statements, the values of one upsert,
/// the rows read back into an answer, and the rebuild of every digest from the records.
///
/// A row per (user, folder) that ever held a record below it: `digest0...3` the `TreeDigest` of every
/// live record below it, `direct0...3` that of the live records directly in it, `head` the highest change
/// tag saved below it (never lowered: a purged tombstone leaves it). The key is (user, parent, path),
/// `parent` the folder it is in ('' for a root): a folder's row is found by its whole key (its parent is
/// its path up to the last `/`), and its children are the rows that follow it under its path as parent,
/// already in path order, in the one tree. (A second index on the parent did not do: without statistics
/// SQLite's planner scanned all of the user's rows by the primary key instead.) A store XORs a batch's
/// `FolderDeltas` into the rows in the modify's own transaction, one upsert per folder.
enum FolderDigestTable {
    /// The eight digest words, in `TreeDigest.signedWords` order: the whole tree's, then the direct ones.
    static let wordColumns = (0..<4).map { "digest\($0)" } + (0..<4).map { "direct\($0)" }

    /// How one store's SQL says what the statements need.
    struct Dialect {
        /// The user's column (`owner` where `user` is a keyword).
        var user: String
        /// A path's type: it must compare bytewise, as children are listed in path order.
        var text: String
        var integer: String
        /// After the table's definition (`WITHOUT ROWID`).
        var tableOptions: String
        /// The `n`th parameter (from 1), repeatable within one statement.
        var parameter: (_ n: Int) -> String
        /// The XOR of two 64-bit integers.
        var xor: (_ old: String, _ new: String) -> String
        /// The higher of two integers.
        var max: (_ old: String, _ new: String) -> String
    }

    /// The statements of one dialect.
    struct SQL {
        /// The table, made when a store gains it.
        let schema: String
        /// XORs one `Upsert` into its row, or makes the row: the XOR is in the statement, so a row is
        /// never read and written back, and no other writer can slip between the two.
        let upsert: String
        /// One folder's row (0 or 1), then, with `withChildren`, its children's, in path order (the
        /// folder's own path is a prefix of theirs, so it comes first): one statement, so that all come
        /// from one snapshot. Parameters: user, the folder's parent (`parent(of:)`), the folder. The
        /// first column says which the row is (0 the folder's, 1 a child's); `Reading` takes them.
        let own: String
        let withChildren: String

        init(_ dialect: Dialect) {
            let user = dialect.user
            let columns = ["path"] + wordColumns + ["head"]
            schema = """
                CREATE TABLE folder_digests (
                    \(user) \(dialect.text) NOT NULL,
                    parent \(dialect.text) NOT NULL,
                    path \(dialect.text) NOT NULL,
                    \(wordColumns.map { "\($0) \(dialect.integer) NOT NULL" }.joined(separator: ", ")),
                    head \(dialect.integer) NOT NULL,
                    PRIMARY KEY (\(user), parent, path)
                )\(dialect.tableOptions);
                """
            let inserted = [user, "parent", "path"] + wordColumns + ["head"]
            let assignments = wordColumns.map { "\($0) = \(dialect.xor("folder_digests.\($0)", "excluded.\($0)"))" }
                + ["head = \(dialect.max("folder_digests.head", "excluded.head"))"]
            upsert = """
                INSERT INTO folder_digests (\(inserted.joined(separator: ", ")))
                VALUES (\(inserted.indices.map { dialect.parameter($0 + 1) }.joined(separator: ", ")))
                ON CONFLICT (\(user), parent, path) DO UPDATE SET \(assignments.joined(separator: ", "))
                """
            let (p1, p2, p3) = (dialect.parameter(1), dialect.parameter(2), dialect.parameter(3))
            own = "SELECT 0, \(columns.joined(separator: ", ")) FROM folder_digests WHERE \(user) = \(p1) AND parent = \(p2) AND path = \(p3)"
            withChildren = own + """

                UNION ALL
                SELECT 1, \(columns.joined(separator: ", ")) FROM folder_digests WHERE \(user) = \(p1) AND parent = \(p3)
                ORDER BY path
                """
        }
    }

    /// One upsert's values, in the order user, parent, path, the eight words, head.
    struct Upsert {
        var user: String
        var parent: String
        var path: String
        var words: [Int64]
        var head: Int64
    }

    /// The upserts that XOR `deltas` into `user`'s rows, one per folder.
    static func upserts(user: String, _ deltas: FolderDeltas) -> [Upsert] {
        deltas.folders.map { path, delta in
            Upsert(user: user, parent: delta.parent ?? "", path: path, words: delta.digest.signedWords + delta.direct.signedWords, head: delta.head)
        }
    }

    /// The `parent` of a folder's row: its path up to the last `/`, '' for a root.
    static func parent(of folder: String) -> String { FolderDeltas.folders(of: folder).last ?? "" }

    /// A record's content id while it is live; nil for a tombstone (it counts as nothing).
    static func content(deleted: Bool, sha256: String) -> String? { deleted ? nil : sha256 }

    /// Gathers the rows of `SQL.own` or `SQL.withChildren` into the answer.
    struct Reading {
        private var own: FolderDigest?
        private var children: [FolderDigest] = []

        init() {}

        /// One row: `kind` its first column, `path` its second, `word(0...8)` the eight words and head.
        mutating func add(kind: Int64, path: String, word: (Int) throws -> Int64) rethrows {
            let words = try (0..<8).map(word)
            let folder = FolderDigest(path: path, digest: TreeDigest(signedWords: Array(words[0..<4])).hex,
                                      direct: TreeDigest(signedWords: Array(words[4..<8])).hex, head: try word(8))
            if kind == 0 { own = folder } else { children.append(folder) }
        }

        /// A folder without a row never held a record: zero digests, head 0.
        func reply(folder: String, children asked: Bool) -> DigestReply {
            DigestReply(folder: own ?? .empty(folder), children: asked ? children : nil)
        }
    }

    /// Rebuilds the rows from the records when a store gains the table (`add` every record, in (user,
    /// path) order, then `finish`): each user's deltas from nothing are written by `write` once that
    /// user's records are all in, so memory holds one user's folders at a time.
    struct Rebuild {
        private var user: String?
        private var deltas = FolderDeltas()
        private let write: (_ user: String, _ deltas: FolderDeltas) throws -> Void

        init(write: @escaping (_ user: String, _ deltas: FolderDeltas) throws -> Void) { self.write = write }

        mutating func add(user: String, path: String, deleted: Bool, sha256: String, tag: Int64) throws {
            if user != self.user { try finish() }
            self.user = user
            deltas.change(path: path, from: nil, to: FolderDigestTable.content(deleted: deleted, sha256: sha256), tag: tag)
        }

        mutating func finish() throws {
            if let user, !deltas.isEmpty { try write(user, deltas) }
            user = nil
            deltas = FolderDeltas()
        }
    }
}

extension FolderDigest {
    /// A folder that holds nothing: zero digests, head 0.
    static func empty(_ path: String) -> FolderDigest {
        FolderDigest(path: path, digest: TreeDigest.empty.hex, direct: TreeDigest.empty.hex, head: 0)
    }
}
