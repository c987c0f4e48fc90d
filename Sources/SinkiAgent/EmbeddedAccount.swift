import Glibc
import SinkiServer
import SinkiSupport

/// The embedded server checks tokens like any other. The agent's own user and token are made on its
/// first start; the token is kept in the state folder (`STATE/token`, mode 0600), where a second agent
/// on the machine finds it (`--token-file STATE/token`).
enum EmbeddedAccount {
    static let fileName = "token"
    static let user = "local"

    /// The agent's token text, made (and its hash kept in `store`) when there is none yet.
    static func token(in store: any ServerStore, stateDirectory: String, device: String) throws -> String {
        let path = stateDirectory + "/" + fileName
        let now = Clock.now()
        if let text = try read(path) {
            let secret = TokenSecret(text: text)
            if let known = try store.token(id: secret.id), secret.matches(known.secretHash), known.isLive(at: now) { return text }
            // The server's data was made afresh (or the token revoked): the file's token is taken in again.
            try store.addUser(user, at: now)
            if try store.token(id: secret.id) == nil {
                try store.addToken(DeviceToken(id: secret.id, user: user, device: device, scope: .full, parentID: nil,
                                               chainID: secret.id, secretHash: secret.hash, createdAt: now))
                return text
            }
        }
        try store.addUser(user, at: now)
        let id = TokenSecret.makeID()
        let secret = TokenSecret.make(id: id)
        try store.addToken(DeviceToken(id: id, user: user, device: device, scope: .full, parentID: nil, chainID: id,
                                       secretHash: secret.hash, createdAt: now))
        try write(secret.text, to: path)
        return secret.text
    }

    private static func read(_ path: String) throws -> String? {
        guard let file = try? FileDescriptor.open(path, flags: O_RDONLY) else { return nil }
        let text = String(decoding: try file.readAll(), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }

    /// Writes the token readable by its owner only, in place once complete (a kill leaves none half-written).
    private static func write(_ text: String, to path: String) throws {
        let temporary = path + ".new"
        let fd = try syscall("open", path: temporary) { open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600) }
        let file = FileDescriptor(raw: fd, path: temporary)
        try file.write(Array((text + "\n").utf8))
        try syscall("fsync", path: temporary) { fsync(fd) }
        try syscall("rename", path: path) { rename(temporary, path) }
    }
}
