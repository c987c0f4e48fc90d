import SinkiRecord
import SinkiSupport

/// `GET /v1/digests?path=FOLDER&children=1`: a folder's digests, by which an agent checks in one request
/// that its copy of the records equals the server's (docs/protocol.md, "Digests"). Reads only, so a
/// read-only token may ask.
struct DigestRoute: Route {
    let store: any RecordStore

    func respond(to request: Request) throws -> Reply {
        guard let folder = try request.query("path"), !folder.isEmpty else {
            throw Problem(.badRequest, detail: "path must name a root or a folder (\(Routes.digests)?path=FOLDER)")
        }
        try LookupRoute.checkPrefix(folder)
        let children = try request.flagQuery("children")
        let reply: DigestReply
        // A narrowed token asking above its prefix gets its prefix's digests (the reply's path says so);
        // one asking beside it gets what an empty folder answers, so that nothing outside it shows.
        switch ScopedPrefix.narrow(asked: folder, scope: request.scopePrefix) {
        case .disjoint:
            reply = DigestReply(folder: .empty(folder), children: children ? [] : nil)
        case let .within(narrowed):
            reply = try store.digests(user: request.identity.user, folder: narrowed ?? folder, children: children)
        }
        return .response(.json(reply.jsonBytes))
    }
}
