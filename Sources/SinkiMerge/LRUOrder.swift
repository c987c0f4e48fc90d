/// Keys from least to most recently used, each with a size: a doubly linked list threaded through
/// a dictionary, so use, insert and removal are O(1).
struct LRUOrder {
    private struct Node {
        var older: String?
        var newer: String?
        var size: Int64
    }

    private var nodes: [String: Node] = [:]
    /// The least recently used key: the next to drop.
    private(set) var oldest: String?
    private var newest: String?

    var count: Int { nodes.count }

    func contains(_ key: String) -> Bool { nodes[key] != nil }

    func size(of key: String) -> Int64? { nodes[key]?.size }

    /// Adds `key` as the most recently used (it must not be present).
    mutating func insertNewest(_ key: String, size: Int64) {
        precondition(nodes[key] == nil, "bug: \(key) is already in the LRU order")
        nodes[key] = Node(older: newest, newer: nil, size: size)
        if let newest { nodes[newest]!.newer = key } else { oldest = key }
        newest = key
    }

    /// Removes `key`; returns its size, nil when it was not there.
    @discardableResult
    mutating func remove(_ key: String) -> Int64? {
        guard let node = nodes.removeValue(forKey: key) else { return nil }
        if let older = node.older { nodes[older]!.newer = node.newer } else { oldest = node.newer }
        if let newer = node.newer { nodes[newer]!.older = node.older } else { newest = node.older }
        return node.size
    }

    /// Makes `key` the most recently used.
    mutating func use(_ key: String) {
        guard newest != key, let size = remove(key) else { return }
        insertNewest(key, size: size)
    }

    /// Keys from least to most recently used (for tests and listings).
    var keysOldestFirst: [String] {
        var out: [String] = []
        var cursor = oldest
        while let key = cursor {
            out.append(key)
            cursor = nodes[key]?.newer
        }
        return out
    }
}
