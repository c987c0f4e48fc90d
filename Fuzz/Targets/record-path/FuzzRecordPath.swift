import SinkiRecord

/// Fuzz target `record-path` (docs/fuzzing.md): `RecordPath(validating:)` either refuses a path with a
/// `PathError` or accepts one that keeps every rule of the safety floor (docs/protocol.md), checked here
/// on the bytes, as the kernel will see them, never through `String`'s Unicode-aware comparisons. The
/// accessors the agent uses to find the root and the file must agree with those bytes, and the path
/// must come back unchanged from a record's JSON.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzRecordPath(_ data: UnsafePointer<UInt8>, _ size: Int) -> Int32 {
    // A peer's path reaches the agent as a JSON string, which is always valid UTF-8 (the reader refuses
    // anything else), so bytes that are not are decoded with replacement characters.
    let text = String(decoding: UnsafeBufferPointer(start: data, count: size), as: UTF8.self)
    checkPath(text)
    return 0
}

let slash = UInt8(ascii: "/")

func require(_ condition: Bool, _ what: @autoclosure () -> String, _ path: String) {
    if !condition { fatalError("record-path invariant broken: \(what()) for \(quoted(path))") }
}

func bytes(_ text: some StringProtocol) -> [UInt8] { Array(text.utf8) }

func joined(_ components: some Sequence<[UInt8]>) -> [UInt8] {
    Array(components.joined(separator: [slash]))
}

func checkPath(_ text: String) {
    let path: RecordPath
    do {
        path = try RecordPath(validating: text)
    } catch {
        // Typed (PathError); its description is what the agent logs.
        _ = error.description
        return
    }
    let raw = bytes(text)
    require(bytes(path.string) == raw, "the path is kept byte for byte", text)
    require(raw.first != slash, "not absolute", text)
    require(!raw.contains(0), "no NUL", text)
    require(!raw.contains(UInt8(ascii: "\\")), "no backslash", text)
    require(raw.count <= RecordPath.maxBytes, "at most \(RecordPath.maxBytes) bytes", text)
    require(String(validating: raw, as: UTF8.self) != nil, "valid UTF-8", text)
    let components = raw.split(separator: slash, omittingEmptySubsequences: false).map(Array.init)
    require(components.count >= 2, "a root and something in it", text)
    for component in components {
        require(!component.isEmpty, "no empty component", text)
        require(component != [0x2E] && component != [0x2E, 0x2E], "no . or .. component", text)
        require(component.count <= RecordPath.maxComponentBytes, "components of at most \(RecordPath.maxComponentBytes) bytes", text)
    }
    // What the agent splits the path into must be what the kernel will walk.
    require(bytes(path.root) == components[0], "root is the first component", text)
    require(bytes(path.relative) == joined(components.dropFirst()), "relative is the rest", text)
    require(bytes(path.name) == components[components.count - 1], "name is the last component", text)
    require(path.depth == components.count - 1, "depth counts the components below the root", text)
    require(path.relativeComponents.map(bytes) == Array(components.dropFirst()), "relativeComponents split on every /", text)
    require(path.isWithin(path), "a path is within itself", text)
    if components.count > 2 {
        guard let parent = path.parent else { return require(false, "a path two deep has a parent", text) }
        require(bytes(parent.string) == joined(components.dropLast()), "the parent drops the last component", text)
        require(path.isWithin(parent), "a path is within its parent", text)
        require(!parent.isWithin(path), "a parent is not within its child", text)
        require(parent.depth == path.depth - 1, "the parent is one less deep", text)
    } else {
        require(path.parent == nil, "a file at the top of its root has no parent path", text)
    }
    // Round trips: rebuilt from its parts, and through a record's JSON.
    do {
        let rebuilt = try RecordPath(root: path.root, relative: path.relative)
        require(bytes(rebuilt.string) == raw, "root + relative rebuilds the path", text)
        var reader = JSONReader(Record(path: path.string).jsonBytes())
        let back = try Record.read(from: &reader)
        try reader.finish()
        require(bytes(back.path) == raw, "the path survives a record's JSON", text)
    } catch {
        require(false, "round trip failed: \(error)", text)
    }
}
