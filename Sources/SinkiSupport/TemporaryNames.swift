/// Names that editors and tools give files they are about to rename or delete (vim's `4913` probe
/// and `file~` backup, `.name.tmpXXXX` written then renamed over the target, GLib's
/// `.goutputstream-*`, Foundation's `.dat.nosync*`, partial downloads). Such a file is held for a
/// grace period before it is read: an atomic save then reaches peers as one modification of the
/// real file, and the temporary name never becomes a record. One that is still there afterwards is
/// synced like any other file.
public enum TemporaryNames {
    public static func looksTemporary(_ name: Substring) -> Bool {
        if name.hasSuffix("~") { return true }
        if let number = Int(name), number >= 4913, (number - 4913) % 123 == 0, number < 4913 + 123 * 100 { return true }
        if name.hasPrefix("#") && name.hasSuffix("#") && name.count > 2 { return true }
        let lower = name.lowercased()
        for suffix in [".tmp", ".temp", ".part", ".partial", ".crdownload", ".swp", ".swx", ".bak~"] where lower.hasSuffix(suffix) {
            return true
        }
        guard name.hasPrefix(".") else { return false }
        for marker in [".tmp", "tmp.", ".swp", ".swx", "goutputstream", ".dat.nosync", ".sb-", ".~"] where lower.contains(marker) {
            return true
        }
        // rsync and many tools: ".name.XXXXXX", six random characters after the last dot.
        if let dot = name.lastIndex(of: "."), dot != name.startIndex {
            let tail = name[name.index(after: dot)...]
            if tail.count == 6 && tail.allSatisfy({ $0.isLetter || $0.isNumber }) && tail.contains(where: { $0.isUppercase }) && tail.contains(where: { $0.isLowercase || $0.isNumber }) {
                return true
            }
        }
        return false
    }
}
