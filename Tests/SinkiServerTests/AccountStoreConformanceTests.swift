import Dispatch
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Synchronization
import Testing

/// A token of `user` made as `sinkid serve token add` makes one, or minted from `parent`.
private func makeToken(_ user: String, device: String = "laptop", scope: TokenScope = .full, parent: String? = nil,
                       chain: String? = nil, at createdAt: Int64 = Clock.now()) -> DeviceToken {
    let id = TokenSecret.makeID()
    return DeviceToken(id: id, user: user, device: device, scope: scope, parentID: parent, chainID: chain ?? id,
                       secretHash: TokenSecret.make(id: id).hash, createdAt: createdAt)
}

/// The `AccountStore` half of a store, on every implementation (`StoreKind.all`).
@Suite struct AccountStoreConformanceTests {
    @Test(arguments: StoreKind.all)
    func usersAreMadeOnceAndListedByName(kind: StoreKind) throws {
        try withStore(kind) { store in
            let made = [try store.addUser("bob", at: 20), try store.addUser("alice", at: 10), try store.addUser("bob", at: 30)]
            #expect(made == [true, true, false])
            let users = try store.users()
            #expect(users == [ServerUser(name: "alice", createdAt: 10), ServerUser(name: "bob", createdAt: 20)])
        }
    }

    @Test(arguments: StoreKind.all)
    func tokensComeBackAsKeptAndNeedTheirUser(kind: StoreKind) throws {
        try withStore(kind) { store in
            #expect(throws: AccountError.self) { try store.addToken(makeToken("nobody")) }
            try store.addUser("alice", at: 1)
            let scope = TokenScope(readOnly: true, prefix: "S/", maxUploadBytes: 1000, maxUploads: 3, expiresAt: Clock.now() + 3_600_000_000_000)
            let first = makeToken("alice", device: "phone", scope: scope, at: 100)
            let second = makeToken("alice", at: 200)
            try store.addToken(second)
            try store.addToken(first)
            #expect(try store.token(id: first.id) == first)
            #expect(try store.token(id: "tmissing") == nil)
            #expect(try store.tokens(user: "alice").map(\.id) == [first.id, second.id])
            try store.addUser("bob", at: 1)
            let bobs = makeToken("bob", at: 50)
            try store.addToken(bobs)
            #expect(try store.tokens(user: nil).map(\.id) == [first.id, second.id, bobs.id])
        }
    }

    @Test(arguments: StoreKind.all)
    func revokingReachesMintedTokensAndTheirChainsOnce(kind: StoreKind) throws {
        try withStore(kind) { store in
            try store.addUser("alice", at: 1)
            let root = makeToken("alice")
            let minted = makeToken("alice", parent: root.id)
            let grandchild = makeToken("alice", parent: minted.id)
            let other = makeToken("alice")
            for token in [root, minted, grandchild, other] { try store.addToken(token) }
            // A refresh of the minted token continues its chain under a new id.
            let refreshed = makeToken("alice", parent: root.id, chain: minted.chainID)
            try store.refresh(refreshed, replacing: minted.id, at: Clock.now())
            #expect(try store.token(id: minted.id)?.revokedAt != nil)
            #expect(try store.token(id: grandchild.id)?.parentID == refreshed.id)
            #expect(throws: AccountError.self) { try store.refresh(makeToken("alice", chain: minted.chainID), replacing: minted.id, at: Clock.now()) }

            let before = try store.revocationCount()
            let revoked = try store.revoke(id: root.id, at: Clock.now())
            #expect(Set(revoked) == [root.id, refreshed.id, grandchild.id])
            #expect(try store.token(id: other.id)?.revokedAt == nil)
            let after = try store.revocationCount()
            #expect(after > before)
            let since = try store.revokedSince(before)
            #expect(Set(since.ids) == Set(revoked) && since.count == after)
            // Again: nothing left to revoke, and the count stays.
            #expect(try store.revoke(id: root.id, at: Clock.now()).isEmpty)
            #expect(try store.revoke(id: "tunknown", at: Clock.now()).isEmpty)
            #expect(try store.revocationCount() == after)
        }
    }

    @Test(arguments: StoreKind.all)
    func uploadsAreCountedPerChainUpToTheLimit(kind: StoreKind) throws {
        try withStore(kind) { store in
            try store.addUser("alice", at: 1)
            let token = makeToken("alice")
            try store.addToken(token)
            #expect(try store.countUpload(chainID: token.chainID, limit: 3))
            #expect(try store.countUploads(chainID: token.chainID, count: 2, limit: 3))
            #expect(try !store.countUpload(chainID: token.chainID, limit: 3))
            #expect(try !store.countUploads(chainID: token.chainID, count: 5, limit: 7))
            #expect(try store.countUpload(chainID: token.chainID, limit: nil))
            #expect(try store.token(id: token.id)?.uploadsUsed == 4)
            // Concurrent counts never pass the limit.
            let chain = makeToken("alice")
            try store.addToken(chain)
            let granted = Atomic<Int>(0)
            DispatchQueue.concurrentPerform(iterations: 20) { _ in
                if (try? store.countUpload(chainID: chain.chainID, limit: 7)) == true { granted.add(1, ordering: .relaxed) }
            }
            #expect(granted.load(ordering: .relaxed) == 7)
            #expect(try store.token(id: chain.id)?.uploadsUsed == 7)
        }
    }

    @Test(arguments: StoreKind.all)
    func useIsNotedAtMostOnceAMinute(kind: StoreKind) throws {
        try withStore(kind) { store in
            try store.addUser("alice", at: 1)
            let token = makeToken("alice")
            try store.addToken(token)
            let now = Clock.now()
            try store.markUsed(id: token.id, at: now)
            try store.markUsed(id: token.id, at: now + 30_000_000_000)
            #expect(try store.token(id: token.id)?.lastUsedAt == now)
            try store.markUsed(id: token.id, at: now + 61_000_000_000)
            #expect(try store.token(id: token.id)?.lastUsedAt == now + 61_000_000_000)
        }
    }

    @Test(arguments: StoreKind.all)
    func removingAUserRevokesTheirTokensAndDropsTheirRecords(kind: StoreKind) throws {
        try withStore(kind) { store in
            #expect(throws: AccountError.self) { try store.removeUser("ghost") }
            try store.addUser("alice", at: 1)
            try store.addUser("bob", at: 1)
            let token = makeToken("alice")
            try store.addToken(token)
            _ = try store.modify(user: "alice", items: checked([fileRecord("A/1", "x")]))
            _ = try store.modify(user: "bob", items: checked([fileRecord("A/1", "y")]))
            let before = try store.revocationCount()
            try store.removeUser("alice")
            #expect(try store.users().map(\.name) == ["bob"])
            #expect(try store.revokedSince(before).ids == [token.id])
            #expect(try store.headTag(user: "alice") == 0)
            #expect(try store.headTag(user: "bob") > 0)
        }
    }
}
