import Foundation
import Glibc
import SinkiConfig
import SinkiServer
import SinkiSupport

/// `sinkid serve`: the sync server in the foreground until SIGTERM or SIGINT.
enum ServeCommand {
    static func run(_ words: [String]) throws(UsageError) -> ExitCode {
        let arguments = try Arguments(words, CommandCatalog.serve)
        if arguments.has("help") {
            print(Help.serve)
            return .success
        }
        if let extra = arguments.positional.first { throw UsageError("unexpected argument \(extra)") }
        guard let data = arguments.value("data") else { throw UsageError("serve needs --data DIR (where the database lives)") }
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
        // Signals are taken synchronously below; every server thread inherits the blocked mask.
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGINT)
        pthread_sigmask(SIG_BLOCK, &set, nil)
        let server: SyncServer
        do {
            server = try SyncServer(configuration: configuration, logger: logger)
            try server.start()
        } catch {
            throw UsageError("cannot serve on \(configuration.listen): \(error)", code: .unavailable)
        }
        logger.info("listening on \(configuration.listen) (port \(server.boundPort)), data in \(configuration.dataDirectory)")
        var received: Int32 = 0
        sigwait(&set, &received)
        logger.info("stopping")
        server.stop()
        return .success
    }
}
