/// What the revocation walk needs of a store's tokens, inside the revoking transaction.
protocol TokenGraph {
    /// Tokens minted from `id`.
    func minted(from id: String) throws -> [String]
    /// The refresh chain `id` belongs to; nil when there is no such token.
    func chain(of id: String) throws -> String?
    /// Every token of the chain, revoked ones included.
    func members(ofChain chain: String) throws -> [String]
    /// Whether `id` is not revoked yet.
    func isUnrevoked(_ id: String) throws -> Bool
}

/// Which tokens a revocation reaches (docs/tokens.md), decided once for both stores.
enum RevocationWalk {
    /// The unrevoked tokens a revocation of `id` reaches, in the order found: itself, every token minted
    /// from it, and the tokens of their refresh chains (a chain is one credential refreshed over time),
    /// to any depth.
    static func reach(from id: String, in graph: some TokenGraph) throws -> [String] {
        var seen: Set<String> = [id]
        var order = [id]
        var frontier = [id]
        var chains: Set<String> = []
        while let next = frontier.popLast() {
            var found = try graph.minted(from: next)
            if let chain = try graph.chain(of: next), chains.insert(chain).inserted {
                found += try graph.members(ofChain: chain)
            }
            for child in found where seen.insert(child).inserted {
                order.append(child)
                frontier.append(child)
            }
        }
        return try order.filter { try graph.isUnrevoked($0) }
    }
}
