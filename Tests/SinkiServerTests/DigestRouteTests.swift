import Foundation
import SinkiRecord
@testable import SinkiServer
import SinkiSupport
import SinkiTestSupport
import Testing

/// `GET /v1/digests` over HTTP with device tokens, on each store: a folder and its children, a read-only
/// token, a token narrowed to a prefix, bad paths, and users kept apart.
@Suite struct DigestRouteTests {
    /// A server on a fresh store, with Alice's and Bob's records saved through it, and their tokens.
    private struct Setup {
        let store: any ServerStore
        let fixture: ServerFixture
        let alice: IssuedToken
        let bob: IssuedToken

        init(_ store: any ServerStore) throws {
            self.store = store
            fixture = try ServerFixture(tokens: [:], store: store)
            alice = try fixture.issue(user: "alice")
            bob = try fixture.issue(user: "bob")
            let saved = try fixture.modify([fileRecord("S/a/1", "1"), fileRecord("S/a/2", "2"), fileRecord("S/b/deep/3", "3"),
                                            fileRecord("S/top", "top"), fileRecord("S/ab/4", "4"), fileRecord("T/x", "x")], token: alice.secret)
            let moreSaved = try fixture.modify([fileRecord("S/a/1", "bob's"), fileRecord("S/c/9", "9")], token: bob.secret)
            guard (saved + moreSaved).allSatisfy({ $0.status == .saved }) else {
                throw ClientError(description: "setting up: \(saved + moreSaved)")
            }
        }

        /// What the definition gives for a user's folders, from the store's own listing.
        func expected(_ user: String) throws -> [String: (folder: FolderDigest, parent: String?)] {
            expectedDigests(of: try allRecords(store, user: user))
        }

        /// Runs `body` with a server on a fresh store of `kind`, stopped before the store's files go.
        static func with(_ kind: StoreKind, _ body: (Setup) throws -> Void) throws {
            let made = try kind.make()
            defer { withExtendedLifetime(made.keepAlive) {} }
            try body(try Setup(made.store))
        }

        func digests(_ query: String, token: IssuedToken) throws -> DigestReply {
            let response = try fixture.request("GET", Routes.digests + "?" + query, token: token.secret)
            guard response.status == 200 else { throw ClientError(description: "expected 200, got \(response.status): \(response.text)") }
            return try DigestReply.parse(response.body)
        }
    }

    @Test(arguments: StoreKind.all)
    func aRootAndItsChildrenCountOnlyTheUsersOwnRecords(kind: StoreKind) throws {
        try Setup.with(kind) { setup in
            let alice = try setup.expected("alice")
            let reply = try setup.digests("path=S&children=1", token: setup.alice)
            #expect(reply == DigestReply(folder: alice["S"]!.folder, children: ["S/a", "S/ab", "S/b"].map { alice[$0]!.folder }))
            // Without children the list is left out; a folder deeper down, by its record path.
            #expect(try setup.digests("path=S", token: setup.alice) == DigestReply(folder: alice["S"]!.folder))
            #expect(try setup.digests("path=\(encoded("S/b/deep"))&children=true", token: setup.alice)
                    == DigestReply(folder: alice["S/b/deep"]!.folder, children: []))
            // A read-only token reads the same.
            let reader = try setup.fixture.issue(user: "alice", device: "tablet", scope: TokenScope(readOnly: true))
            #expect(try setup.digests("path=S&children=1", token: reader) == reply)
            // Bob's records are his alone: his digests differ, and his folder S/c is not Alice's child.
            let bob = try setup.expected("bob")
            let bobs = try setup.digests("path=S&children=1", token: setup.bob)
            #expect(bobs == DigestReply(folder: bob["S"]!.folder, children: ["S/a", "S/c"].map { bob[$0]!.folder }))
            #expect(bobs.folder.digest != reply.folder.digest)
            #expect(try setup.digests("path=T", token: setup.bob) == DigestReply(folder: .empty("T")))

            // An edit changes the digest of every folder above it, and their heads become its tag.
            let results = try setup.fixture.modify([fileRecord("S/b/deep/3", "three", baseTag: alice["S/b/deep"]!.folder.head)],
                                                   token: setup.alice.secret)
            let tag = try #require(results.first?.record?.changeTag)
            let edited = try setup.digests("path=S&children=1", token: setup.alice)
            #expect(edited.folder.head == tag && edited.folder.digest != reply.folder.digest && edited.folder.direct == reply.folder.direct)
            #expect(edited.children?.map(\.head) == [alice["S/a"]!.folder.head, alice["S/ab"]!.folder.head, tag])
            let now = try setup.expected("alice")
            #expect(edited == DigestReply(folder: now["S"]!.folder, children: ["S/a", "S/ab", "S/b"].map { now[$0]!.folder }))
        }
    }

    @Test(arguments: StoreKind.all)
    func aNarrowedTokenSeesItsPrefixAndNothingBesideIt(kind: StoreKind) throws {
        try Setup.with(kind) { setup in
            let alice = try setup.expected("alice")
            let narrow = try setup.fixture.issue(user: "alice", device: "phone", scope: TokenScope(prefix: "S/a"))
            let own = DigestReply(folder: alice["S/a"]!.folder, children: [])
            // At its prefix, or above it (the reply names the prefix): the prefix's digests.
            #expect(try setup.digests("path=\(encoded("S/a"))&children=1", token: narrow) == own)
            #expect(try setup.digests("path=S&children=1", token: narrow) == own)
            #expect(try setup.digests("path=S", token: narrow) == DigestReply(folder: alice["S/a"]!.folder))
            // Below it: that folder's (none held one here).
            #expect(try setup.digests("path=\(encoded("S/a/x"))&children=1", token: narrow) == DigestReply(folder: .empty("S/a/x"), children: []))
            // Beside it, even where the user holds records: an empty folder.
            for path in ["S/b", "S/ab", "T", "S/b/deep"] {
                #expect(try setup.digests("path=\(encoded(path))&children=1", token: narrow) == DigestReply(folder: .empty(path), children: []), "\(path)")
                #expect(try setup.digests("path=\(encoded(path))", token: narrow) == DigestReply(folder: .empty(path)), "\(path)")
            }
        }
    }

    @Test(arguments: ["..%2Fx", "%2Fetc", "a%2F%2Fb", "S%2F.", "S%2Fx%2F", "S%5Cx", "S%2Fa%00b"].map { ("path=" + $0, "bad-path") }
          + ["", "path=", "children=1", "path=%FF", "path=S&children=yes"].map { ($0, "bad-request") })
    func aBadPathOrAMalformedRequestIsRefused(query: String, code: String) throws {
        let fixture = try ServerFixture.withAccounts()
        let token = try fixture.issue(user: "alice")
        let response = try fixture.request("GET", Routes.digests + "?" + query, token: token.secret)
        #expect(response.status == 400)
        #expect(try response.problem().code == code)
    }

    @Test func withoutATokenNothingIsAnswered() throws {
        let fixture = try ServerFixture.withAccounts()
        let response = try fixture.request("GET", Routes.digests + "?path=S")
        #expect(response.status == 401)
        #expect(try response.problem().code == "unauthorized")
    }
}
