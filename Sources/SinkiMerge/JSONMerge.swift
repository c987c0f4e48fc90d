/// The `json` rule: a three-way merge of JSON documents.
///
/// - A value only one side changed takes that side; both changed it the same way, that value.
/// - Objects changed on both sides merge key by key, recursively: a key added on one side is added,
///   a key deleted on one side (and untouched on the other) is deleted.
/// - Arrays changed on both sides merge as sequences against the base: an element added on one side
///   is added where it was added, one deleted on one side is deleted; elements both sides inserted at
///   the same place are all kept (the run that sorts first first, elements both inserted once); a
///   stretch both sides replaced element for element merges those elements recursively.
/// - Anything else (a scalar changed differently on both sides, a key deleted on one side and
///   changed on the other, overlapping edits of an array) is a conflict: the rule's fallback decides.
///
/// Every step is symmetric, so the result does not depend on which side is local.
enum JSONMerge {
    /// Why two JSON versions could not be merged.
    enum Failure: Error, CustomStringConvertible {
        case unreadable(side: String, JSONNodeReader.Failure)
        /// A value changed differently on both sides; `path` is a JSON pointer to it.
        case conflict(path: String)
        case tooComplex

        var description: String {
            switch self {
            case let .unreadable(side, failure): return "the \(side) version is \(failure)"
            case let .conflict(path): return "both sides changed \(path.isEmpty ? "the document" : path) differently"
            case .tooComplex: return "the versions differ too much to merge"
            }
        }
    }

    static func merge(base: [UInt8], local: [UInt8], remote: [UInt8]) throws(Failure) -> [UInt8] {
        func parse(_ bytes: [UInt8], _ side: String) throws(Failure) -> JSONNode {
            do { return try JSONNodeReader.parse(bytes) } catch { throw .unreadable(side: side, error) }
        }
        let baseNode = try parse(base, "base"), localNode = try parse(local, "local"), remoteNode = try parse(remote, "remote")
        var merger = Merger()
        let merged: JSONNode?
        do {
            merged = try merger.merge(baseNode, localNode, remoteNode, path: "")
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .tooComplex
        }
        // Both sides keep a document, so the merge of the top level is never "absent".
        guard let merged else { throw .conflict(path: "") }
        let layout = JSONLayout.combining(JSONLayout(of: local), JSONLayout(of: remote), base: JSONLayout(of: base))
        return layout.render(merged)
    }

    /// The recursive merge, with the interning of values that array merges need.
    private struct Merger {
        private var interner = Interner<JSONNode>()
        private var nodes: [JSONNode] = []
        private var compactForms: [Int: [UInt8]] = [:]

        private mutating func ids(_ elements: [JSONNode]) -> [Int] {
            elements.map { element in
                let id = interner.id(element)
                if id == nodes.count { nodes.append(element) }
                return id
            }
        }

        private mutating func compact(_ id: Int) -> [UInt8] {
            if let known = compactForms[id] { return known }
            let form = JSONLayout.compact(nodes[id])
            compactForms[id] = form
            return form
        }

        /// The merge of one value; nil when the result is that the key is absent.
        mutating func merge(_ base: JSONNode?, _ local: JSONNode?, _ remote: JSONNode?, path: String) throws -> JSONNode? {
            if local == remote || remote == base { return local }
            if local == base { return remote }
            switch (local, remote) {
            case let (.object(l)?, .object(r)?):
                return .object(try mergeObjects(base?.members ?? [], l, r, path: path))
            case let (.array(l)?, .array(r)?):
                return .array(try mergeArrays(base?.elements ?? [], l, r, path: path))
            default:
                throw Failure.conflict(path: path)
            }
        }

        private mutating func mergeObjects(_ base: [JSONNode.Member], _ local: [JSONNode.Member], _ remote: [JSONNode.Member],
                                           path: String) throws -> [JSONNode.Member] {
            let baseValues = Dictionary(uniqueKeysWithValues: base.map { ($0.key, $0.value) })
            let localValues = Dictionary(uniqueKeysWithValues: local.map { ($0.key, $0.value) })
            let remoteValues = Dictionary(uniqueKeysWithValues: remote.map { ($0.key, $0.value) })
            var values: [String: JSONNode] = [:]
            // Keys in a fixed order, so a conflict names the same key whichever side runs this.
            for key in Set(baseValues.keys).union(localValues.keys).union(remoteValues.keys).sorted() {
                let merged = try merge(baseValues[key], localValues[key], remoteValues[key], path: path + "/" + Self.escape(key))
                if let merged { values[key] = merged }
            }
            // Key order: the two sides' orders merged like any sequence, then each key once.
            var keys = Interner<String>()
            var names: [String] = []
            func intern(_ members: [JSONNode.Member]) -> [Int] {
                members.map { member in
                    let id = keys.id(member.key)
                    if id == names.count { names.append(member.key) }
                    return id
                }
            }
            let baseIDs = intern(base), localIDs = intern(local), remoteIDs = intern(remote)
            let order = try ThreeWay.merge(base: baseIDs, first: localIDs, second: remoteIDs) { chunk in
                let added1 = zip(chunk.first, chunk.firstKept).filter { !$0.1 }.map { localIDs[$0.0] }
                let added2 = zip(chunk.second, chunk.secondKept).filter { !$0.1 }.map { remoteIDs[$0.0] }
                return try ThreeWay.interleave(added1, added2) { x, y in
                    x.lazy.map { names[$0] }.lexicographicallyPrecedes(y.lazy.map { names[$0] }) { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
                }
            }
            var out: [JSONNode.Member] = []
            var placed = Set<String>()
            for id in order {
                let key = names[id]
                if let value = values[key], placed.insert(key).inserted { out.append(JSONNode.Member(key: key, value: value)) }
            }
            for key in values.keys.sorted() where !placed.contains(key) {
                out.append(JSONNode.Member(key: key, value: values[key]!))
            }
            return out
        }

        private mutating func mergeArrays(_ base: [JSONNode], _ local: [JSONNode], _ remote: [JSONNode], path: String) throws -> [JSONNode] {
            let baseIDs = ids(base), localIDs = ids(local), remoteIDs = ids(remote)
            let merged = try ThreeWay.merge(base: baseIDs, first: localIDs, second: remoteIDs) { chunk in
                let first = Array(localIDs[chunk.first]), second = Array(remoteIDs[chunk.second])
                if chunk.base.isEmpty {
                    // Both sides inserted here: keep all of it.
                    return try ThreeWay.interleave(first, second) { x, y in
                        x.lexicographicallyPrecedes(y) { self.compact($0).lexicographicallyPrecedes(self.compact($1)) }
                    }
                }
                guard chunk.base.count == first.count, first.count == second.count else {
                    throw Failure.conflict(path: path + "/\(chunk.base.lowerBound)")
                }
                // Both replaced the same elements one for one: merge them pairwise.
                var elements: [JSONNode] = []
                for (offset, baseIndex) in chunk.base.enumerated() {
                    let merged = try self.merge(self.nodes[baseIDs[baseIndex]], self.nodes[first[offset]], self.nodes[second[offset]],
                                                path: path + "/\(baseIndex)")
                    guard let merged else { throw Failure.conflict(path: path + "/\(baseIndex)") }
                    elements.append(merged)
                }
                return self.ids(elements)
            }
            return merged.map { nodes[$0] }
        }

        /// A key as a JSON pointer token (RFC 6901).
        private static func escape(_ key: String) -> String {
            var out = ""
            for character in key {
                switch character {
                case "~": out += "~0"
                case "/": out += "~1"
                default: out.append(character)
                }
            }
            return out
        }
    }
}
