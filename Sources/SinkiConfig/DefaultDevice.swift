import Glibc
import SinkiRecord
import SinkiSupport

/// The device name of an agent that was given none (`--device`, `[agent] device`): the host name and
/// a short suffix, made once per state folder and kept there in the file `device`, so that two agents
/// on one machine (two state folders) are two devices, and a restart keeps the name. A state folder
/// from before this rule (a database, no kept name) keeps the bare host name its records carry.
public enum DefaultDevice {
    /// The file in the state folder that keeps the name.
    public static let fileName = "device"

    /// The name, and whether it was made now (the caller keeps it with `keep` once it runs).
    static func name(stateDirectory: String, hostName: String) throws(ConfigError) -> (name: String, isNew: Bool) {
        let base: String
        do { base = try Checks.deviceName(hostName) } catch {
            throw ConfigError(.badValue, "the host name \(quoted(hostName)) cannot be a device name (\(error.message)); pass --device NAME",
                              source: "--device", line: nil)
        }
        if let kept = read(stateDirectory + "/" + fileName), let name = try? Checks.deviceName(kept) { return (name, false) }
        if access(stateDirectory + "/state.db", F_OK) == 0 { return (base, false) }
        let suffix = (0..<3).map { _ in String(UInt8.random(in: 0...255), radix: 16).leftPadded(to: 2) }.joined()
        return (base + "-" + suffix, true)
    }

    /// Keeps a name made now in the state folder (which exists by then).
    public static func keep(_ name: String, stateDirectory: String) throws(SystemError) {
        let file = try FileDescriptor.open(stateDirectory + "/" + fileName, flags: O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode: 0o644)
        try file.write(Array((name + "\n").utf8))
    }

    private static func read(_ path: String) -> String? {
        guard let file = try? FileDescriptor.open(path, flags: O_RDONLY | O_CLOEXEC), let bytes = try? file.readAll(sizeHint: 256),
              bytes.count <= 1024 else { return nil }
        let text = String(decoding: bytes, as: UTF8.self).trimmingWhitespace
        return text.isEmpty ? nil : text
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }

    var trimmingWhitespace: String {
        var scalars = Substring(self)
        while let first = scalars.first, first.isWhitespace { scalars.removeFirst() }
        while let last = scalars.last, last.isWhitespace { scalars.removeLast() }
        return String(scalars)
    }
}
