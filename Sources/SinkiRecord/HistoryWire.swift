/// One version of a path as the server keeps it (docs/protocol.md, "History"): the record as it was
/// saved (its `changeTag` is the version's number), when the server saved it, and when a later version
/// took its place (nil while it is the current one).
public struct VersionEntry: Sendable, Equatable {
    public var record: Record
    /// Nanoseconds since the epoch, the server's clock.
    public var savedAt: Int64
    /// Nanoseconds since the epoch; nil for the path's current record.
    public var supersededAt: Int64?

    public init(record: Record, savedAt: Int64, supersededAt: Int64?) {
        self.record = record
        self.savedAt = savedAt
        self.supersededAt = supersededAt
    }

    /// The version's number: the change tag it was saved with.
    public var version: Int64 { record.changeTag }

    public func write(to writer: inout JSONWriter, includeData: Bool = true) {
        writer.beginObject()
        writer.key("record")
        record.write(to: &writer, includeData: includeData)
        writer.field("savedAt", savedAt)
        if let supersededAt { writer.field("supersededAt", supersededAt) }
        writer.endObject()
    }

    public static func read(from reader: inout JSONReader) throws -> VersionEntry {
        var record: Record?
        var entry = VersionEntry(record: Record(path: ""), savedAt: 0, supersededAt: nil)
        try reader.readObject { reader, key in
            switch key {
            case "record": record = try Record.read(from: &reader)
            case "savedAt": entry.savedAt = try reader.readInt64()
            case "supersededAt": entry.supersededAt = reader.readNull() ? nil : try reader.readInt64()
            default: try reader.skipValue()
            }
        }
        guard let record else { throw RecordFieldError(field: "record", message: "missing") }
        entry.record = record
        return entry
    }

    public var jsonBytes: [UInt8] {
        var writer = JSONWriter(capacity: 512 + (record.data?.count ?? 0) * 4 / 3)
        write(to: &writer)
        return writer.bytes
    }

    public static func parse(_ bytes: [UInt8]) throws -> VersionEntry {
        var reader = JSONReader(bytes)
        let entry = try read(from: &reader)
        try reader.finish()
        return entry
    }
}

/// A page of versions: those of one path, newest first (`GET /v1/history`), or those a folder held at a
/// moment, in path order (`GET /v1/history/folder`, `at` set). Without content.
public struct VersionPage: Sendable, Equatable {
    public var path: String
    public var versions: [VersionEntry]
    /// More versions follow: ask again with `before` (a path's) or `after` (a folder's).
    public var more: Bool
    /// The moment a folder's page is of (nanoseconds since the epoch); nil for one path's versions.
    public var at: Int64?

    public init(path: String, versions: [VersionEntry], more: Bool, at: Int64? = nil) {
        self.path = path
        self.versions = versions
        self.more = more
        self.at = at
    }

    public var jsonBytes: [UInt8] {
        var writer = JSONWriter(capacity: 64 + versions.count * 400)
        writer.beginObject()
        writer.field("path", path)
        if let at { writer.field("at", at) }
        writer.key("versions")
        writer.beginArray()
        for version in versions { version.write(to: &writer, includeData: false) }
        writer.endArray()
        writer.field("more", more)
        writer.endObject()
        return writer.bytes
    }

    public static func parse(_ bytes: [UInt8]) throws -> VersionPage {
        var reader = JSONReader(bytes)
        var page = VersionPage(path: "", versions: [], more: false)
        try reader.readObject { reader, key in
            switch key {
            case "path": page.path = try reader.readString()
            case "at": page.at = reader.readNull() ? nil : try reader.readInt64()
            case "versions": try reader.readArray { reader in page.versions.append(try VersionEntry.read(from: &reader)) }
            case "more": page.more = try reader.readBool()
            default: try reader.skipValue()
            }
        }
        try reader.finish()
        return page
    }
}

/// `POST /v1/history/restore`: one version made current again (at its path, or at `to`), or every path
/// below a folder brought back to what it held at a moment. `dryRun` only says what would change.
public struct RestoreRequest: Sendable, Equatable {
    /// What to bring back.
    public enum Target: Sendable, Equatable {
        /// Version `version` of `path`, saved at `to` (nil: at `path`).
        case version(path: String, version: Int64, to: String?)
        /// Every path at or below `folder` as it was at `at` (nanoseconds since the epoch).
        case folder(String, at: Int64)
    }

    public var target: Target
    public var dryRun: Bool

    public init(_ target: Target, dryRun: Bool = false) {
        self.target = target
        self.dryRun = dryRun
    }

    public var jsonBytes: [UInt8] {
        var writer = JSONWriter()
        writer.beginObject()
        switch target {
        case let .version(path, version, to):
            writer.field("path", path)
            writer.field("version", version)
            if let to { writer.field("to", to) }
        case let .folder(folder, at):
            writer.field("path", folder)
            writer.field("at", at)
        }
        if dryRun { writer.field("dryRun", true) }
        writer.endObject()
        return writer.bytes
    }

    public static func parse(_ bytes: [UInt8]) throws -> RestoreRequest {
        var reader = JSONReader(bytes)
        var path: String?, version: Int64?, to: String?, at: Int64?, dryRun = false
        try reader.readObject { reader, key in
            switch key {
            case "path": path = try reader.readString()
            case "version": version = reader.readNull() ? nil : try reader.readInt64()
            case "to": to = reader.readNull() ? nil : try reader.readString()
            case "at": at = reader.readNull() ? nil : try reader.readInt64()
            case "dryRun": dryRun = try reader.readBool()
            default: try reader.skipValue()
            }
        }
        try reader.finish()
        guard let path else { throw RecordFieldError(field: "path", message: "missing") }
        switch (version, at) {
        case let (version?, nil):
            return RestoreRequest(.version(path: path, version: version, to: to), dryRun: dryRun)
        case let (nil, at?):
            guard to == nil else { throw RecordFieldError(field: "to", message: "a folder is restored in place; to is for one version") }
            return RestoreRequest(.folder(path, at: at), dryRun: dryRun)
        case (nil, nil): throw RecordFieldError(field: "version", message: "give version (one path) or at (a folder)")
        case (_?, _?): throw RecordFieldError(field: "at", message: "give version or at, not both")
        }
    }
}

/// One path a restore changed (or, in a dry run, would change).
public struct RestoreChange: Sendable, Equatable {
    public enum Action: String, Sendable {
        /// The path holds an earlier version's content again (or anew, at `to`).
        case restore
        /// The path held nothing then: its current record is deleted (and kept in history).
        case delete
    }

    public var path: String
    public var action: Action
    /// The version brought back; for a delete, the version it replaces.
    public var from: Int64
    /// The record saved, without content; its `changeTag` is 0 in a dry run.
    public var record: Record

    public init(path: String, action: Action, from: Int64, record: Record) {
        self.path = path
        self.action = action
        self.from = from
        self.record = record
    }
}

/// The answer to a restore: every path changed, deletes first (deepest first), then restores.
public struct RestoreResponse: Sendable, Equatable {
    public var changes: [RestoreChange]
    public var dryRun: Bool

    public init(changes: [RestoreChange], dryRun: Bool) {
        self.changes = changes
        self.dryRun = dryRun
    }

    public var jsonBytes: [UInt8] {
        var writer = JSONWriter(capacity: 64 + changes.count * 400)
        writer.beginObject()
        writer.key("changes")
        writer.beginArray()
        for change in changes {
            writer.beginObject()
            writer.field("path", change.path)
            writer.field("action", change.action.rawValue)
            writer.field("from", change.from)
            writer.key("record")
            change.record.write(to: &writer, includeData: false)
            writer.endObject()
        }
        writer.endArray()
        writer.field("dryRun", dryRun)
        writer.endObject()
        return writer.bytes
    }

    public static func parse(_ bytes: [UInt8]) throws -> RestoreResponse {
        var reader = JSONReader(bytes)
        var response = RestoreResponse(changes: [], dryRun: false)
        try reader.readObject { reader, key in
            switch key {
            case "changes":
                try reader.readArray { reader in
                    var change = RestoreChange(path: "", action: .restore, from: 0, record: Record(path: ""))
                    try reader.readObject { reader, key in
                        switch key {
                        case "path": change.path = try reader.readString()
                        case "action":
                            let text = try reader.readString()
                            guard let action = RestoreChange.Action(rawValue: text) else {
                                throw RecordFieldError(field: "action", message: "unknown action \(quoted(text))")
                            }
                            change.action = action
                        case "from": change.from = try reader.readInt64()
                        case "record": change.record = try Record.read(from: &reader)
                        default: try reader.skipValue()
                        }
                    }
                    response.changes.append(change)
                }
            case "dryRun": response.dryRun = try reader.readBool()
            default: try reader.skipValue()
            }
        }
        try reader.finish()
        return response
    }
}
