/// Maps method and path to a route. Paths are exact (`/v1/records/modify`) or prefixes ending in `/`
/// whose rest is handed to the route as `Request.pathParameter` (`/v1/uploads/` for `/v1/uploads/ID`).
struct Router: Sendable {
    private struct Entry: Sendable {
        let method: String
        let path: String
        let isPrefix: Bool
        let route: any Route
    }

    enum Match {
        case found(any Route, parameter: String)
        /// The path exists, but not with this method; `allowed` lists the methods it takes.
        case wrongMethod(allowed: [String])
        case notFound
    }

    private var entries: [Entry] = []

    mutating func add(_ method: String, _ path: String, _ route: any Route) {
        entries.append(Entry(method: method, path: path, isPrefix: false, route: route))
    }

    /// A route for every path below `prefix` (which ends in `/`); the rest must be one non-empty segment.
    mutating func addPrefix(_ method: String, _ prefix: String, _ route: any Route) {
        precondition(prefix.hasSuffix("/"), "bug: a prefix route must end in /")
        entries.append(Entry(method: method, path: prefix, isPrefix: true, route: route))
    }

    func match(method: String, path: String) -> Match {
        var allowed: [String] = []
        for entry in entries {
            let parameter: String
            if entry.isPrefix {
                guard path.hasPrefix(entry.path) else { continue }
                let rest = path.dropFirst(entry.path.count)
                guard !rest.isEmpty, !rest.contains("/") else { continue }
                parameter = String(rest)
            } else {
                guard path == entry.path else { continue }
                parameter = ""
            }
            if entry.method == method { return .found(entry.route, parameter: parameter) }
            allowed.append(entry.method)
        }
        return allowed.isEmpty ? .notFound : .wrongMethod(allowed: allowed)
    }
}
