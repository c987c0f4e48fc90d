import Foundation
import Glibc
import SinkiConfig
import SinkiServer
import SinkiSupport

/// `sinkid serve`: the sync server in the foreground until SIGTERM or SIGINT.
enum ServeCommand {
    static func run(_ words: [String]) throws(UsageError) -> ExitCode {
        switch words.first {
        case "token": return try ServeAccounts.token(Array(words.dropFirst()))
        case "user": return try ServeAccounts.user(Array(words.dropFirst()))
        default: break
        }
        guard let arguments = try Arguments.orHelp(words, CommandCatalog.serve) else { return .success }
        if let extra = arguments.positional.first { throw UsageError("unexpected argument \(extra) (serve token or serve user for the accounts)") }
        for flag in ["device", "prefix", "max-upload", "max-uploads", "expires"] where arguments.value(flag) != nil {
            throw UsageError("--\(flag) is for sinkid serve token add")
        }
        for flag in ["read-only", "yes", "json"] where arguments.has(flag) {
            throw UsageError("--\(flag) is for sinkid serve token or serve user")
        }
        guard let data = arguments.value("data") else {
            throw UsageError("serve needs --data DIR (where the database lives, or with --database the uploads)")
        }
        let logger = Logger(label: "sinkid serve", level: try RunCommand.logLevel(arguments.value("log-level")))
        var configuration = ServerConfiguration(listen: arguments.value("listen") ?? "127.0.0.1:7071",
                                                dataDirectory: RunCommand.absolute(data))
        if let tokens = arguments.value("tokens") {
            do { configuration.tokens = try TokenFile.load(path: tokens) } catch {
                throw UsageError("\(error)", code: .config)
            }
        }
        if let text = arguments.value("max-upload-size") {
            guard let size = ConfigValues.size(text), size > 0 else { throw UsageError("--max-upload-size \(text) is not a size such as 64GiB") }
            configuration.uploads.maxSize = size
        }
        if let text = arguments.value("upload-expiry") {
            guard let duration = ConfigValues.duration(text), duration > .zero else {
                throw UsageError("--upload-expiry \(text) is not a duration such as 24h")
            }
            let (seconds, attoseconds) = duration.components
            configuration.uploads.expirySeconds = Double(seconds) + Double(attoseconds) / 1e18
        }
        if let text = arguments.value("chunk-grace") {
            guard let duration = ConfigValues.duration(text), duration > .zero else {
                throw UsageError("--chunk-grace \(text) is not a duration such as 24h")
            }
            let (seconds, attoseconds) = duration.components
            configuration.retention.chunkGraceSeconds = Double(seconds) + Double(attoseconds) / 1e18
        }
        if let text = arguments.value("rate-limit") {
            guard let rate = Double(text), rate >= 0, rate.isFinite else {
                throw UsageError("--rate-limit \(text) is not a number of requests per second such as 200 (0: no limit)")
            }
            configuration.limits.requestsPerSecond = rate
            // A second's worth at once: an agent's catch-up pages and a push go out together.
            configuration.limits.requestBurst = max(1, Int(rate.rounded(.up)))
        }
        if let text = arguments.value("tombstone-days") {
            guard let days = Double(text), days >= 0, days.isFinite else {
                throw UsageError("--tombstone-days \(text) is not a number of days such as 30 (0 keeps tombstones forever)")
            }
            configuration.retention.tombstoneDays = days
        }
        if let text = arguments.value("history-days") {
            guard let days = Double(text), days >= 0, days.isFinite else {
                throw UsageError("--history-days \(text) is not a number of days such as 30 (0 keeps no history)")
            }
            configuration.retention.historyDays = days
        }
        if let text = arguments.value("quota") {
            guard let size = ConfigValues.size(text), size > 0 else { throw UsageError("--quota \(text) is not a size such as 10GiB") }
            configuration.defaultQuota = size
        }
        // Signals are taken synchronously below; every server thread inherits the blocked mask.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        pthread_sigmask(SIG_BLOCK, &set, nil)
        if arguments.has("insecure-no-auth") { configuration.authentication = .none }
        if arguments.has("behind-proxy") { configuration.behindProxy = true }
        if let url = arguments.value("public-url") {
            guard PublicOrigin.parse(publicURL: url) != nil else {
                throw UsageError("--public-url \(url) is not an origin such as https://sync.example.org or http://10.0.0.2:8080 (no path)")
            }
            configuration.publicURL = url
        }
        let server: SyncServer
        if let url = arguments.value("database") {
            // Records and accounts in PostgreSQL; uploads stay in the data folder.
            do {
                try FileManager.default.createDirectory(atPath: configuration.dataDirectory, withIntermediateDirectories: true)
                let store = try PostgresStore(url: url, connections: max(1, configuration.threads), policy: configuration.storePolicy)
                server = SyncServer(configuration: configuration, store: store, logger: logger)
            } catch {
                throw UsageError("cannot serve on \(configuration.listen): cannot open the database \(redactedPostgresURL(url)): \(error)",
                                 code: .unavailable)
            }
        } else {
            do {
                server = try SyncServer(configuration: configuration, logger: logger)
            } catch {
                throw UsageError("cannot serve on \(configuration.listen): \(error)", code: .unavailable)
            }
        }
        if configuration.authentication == .tokens { try firstUser(server.store, data: configuration.dataDirectory, logger: logger) }
        do { try server.start() } catch {
            throw UsageError("cannot serve on \(configuration.listen): \(error)", code: .unavailable)
        }
        let database = arguments.value("database").map { ", records in \(redactedPostgresURL($0))" } ?? ""
        logger.info("listening on \(configuration.listen) (port \(server.boundPort)), data in \(configuration.dataDirectory)\(database)")
        var received: Int32 = 0
        sigwait(&set, &received)
        logger.info("stopping")
        server.stop()
        return .success
    }

    /// A server with no users yet gets one, whose first device token goes to `DATA/first-token` (mode
    /// 0600): the way in for its first agent (`--token-file`), said in one log line.
    static func firstUser(_ store: any ServerStore, data: String, logger: Logger) throws(UsageError) {
        do {
            guard try store.users().isEmpty else { return }
            let made = try ServeAccounts.issue(store, user: "owner", device: "first", scope: .full)
            let path = data + "/first-token"
            let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
            guard fd >= 0 else { throw SystemError("open", errno: errno, path: path) }
            let file = FileDescriptor(raw: fd, path: path)
            try file.write(Array((made.secret.text + "\n").utf8))
            logger.info("no users yet: made user owner; its first device token is in \(path) (sinkid --token-file \(path); sinkid serve token add for more)")
        } catch {
            throw UsageError("cannot make the first user in \(data): \(error)", code: .unavailable)
        }
    }
}
