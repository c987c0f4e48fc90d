import Glibc
import CSQLite

/// A failed SQLite call, with the statement it ran and the database file.
public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    public var code: Int32
    public var message: String
    public var sql: String?
    public var path: String

    public var description: String {
        var text = "sqlite \(path): \(message) (\(code))"
        if let sql { text += " in: \(sql.prefix(120))" }
        return text
    }

    /// The database is locked by another process or connection.
    public var isBusy: Bool { code & 0xFF == SQLITE_BUSY || code & 0xFF == SQLITE_LOCKED }
    /// The disk (or the database's size limit) is full.
    public var isFull: Bool { code & 0xFF == SQLITE_FULL }
}

/// A value bound to or read from a statement.
public enum SQLValue: Sendable, Equatable {
    case null
    case int(Int64)
    case double(Double)
    case text(String)
    case blob([UInt8])
}

/// Converts Swift values into statement parameters.
public protocol SQLBindable {
    var sqlValue: SQLValue { get }
}

extension Int64: SQLBindable { public var sqlValue: SQLValue { .int(self) } }
extension Int: SQLBindable { public var sqlValue: SQLValue { .int(Int64(self)) } }
extension Int32: SQLBindable { public var sqlValue: SQLValue { .int(Int64(self)) } }
extension UInt32: SQLBindable { public var sqlValue: SQLValue { .int(Int64(self)) } }
extension UInt64: SQLBindable { public var sqlValue: SQLValue { .int(Int64(bitPattern: self)) } }
extension Bool: SQLBindable { public var sqlValue: SQLValue { .int(self ? 1 : 0) } }
extension Double: SQLBindable { public var sqlValue: SQLValue { .double(self) } }
extension String: SQLBindable { public var sqlValue: SQLValue { .text(self) } }
extension Array: SQLBindable where Element == UInt8 { public var sqlValue: SQLValue { .blob(self) } }
extension SQLValue: SQLBindable { public var sqlValue: SQLValue { self } }
extension Optional: SQLBindable where Wrapped: SQLBindable {
    public var sqlValue: SQLValue { self?.sqlValue ?? .null }
}

// SQLITE_TRANSIENT is a macro casting -1 to a function pointer; Swift cannot import it.
private let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

/// One SQLite connection. Not Sendable: a connection belongs to one thread or executor at a time.
public final class SQLiteDatabase {
    let handle: OpaquePointer
    public let path: String
    private var statements: [String: Statement] = [:]
    private var transactionDepth = 0
    /// Inside `reading`: a write there would upgrade a deferred transaction, which another writer can refuse.
    private var readOnly = false

    /// Opens (creating if needed) a database in WAL mode with a busy timeout. `shared`: the file is on a
    /// network file system that other machines open too, where WAL's shared memory cannot reach: a
    /// rollback journal instead, each commit synced.
    public init(path: String, readOnly: Bool = false, shared: Bool = false) throws(SQLiteError) {
        if !readOnly { Self.keepPrivate(path) }
        var db: OpaquePointer?
        let flags = (readOnly ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE)
            | SQLITE_OPEN_NOMUTEX
        let status = sqlite3_open_v2(path, &db, flags, nil)
        guard status == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close_v2(db)
            throw SQLiteError(code: status, message: message, sql: nil, path: path)
        }
        handle = db
        self.path = path
        sqlite3_busy_timeout(db, Self.busyMilliseconds)
        sqlite3_extended_result_codes(db, 1)
        if !readOnly {
            try setModes(shared ? "PRAGMA journal_mode=DELETE; PRAGMA synchronous=FULL; PRAGMA foreign_keys=ON;"
                                : "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;")
        }
    }

    /// How long a statement waits for another connection's lock.
    static let busyMilliseconds: Int32 = 10_000

    /// Runs the pragmas that set the journal mode, tried again while another connection holds the lock
    /// they need: the switch of a new database to WAL answers "database is locked" at once, without the
    /// busy timeout, when another connection is opening it too (two uploads of a new user, each making
    /// the user's chunk index, had one answered 500).
    private func setModes(_ pragmas: String) throws(SQLiteError) {
        let deadline = Clock.monotonic() + Int64(Self.busyMilliseconds) * 1_000_000
        var pause: UInt32 = 1_000
        while true {
            do {
                try execute(pragmas)
                return
            } catch where error.isBusy && Clock.monotonic() < deadline {
                usleep(pause)
                pause = min(pause * 2, 50_000)
            }
        }
    }

    /// A database holds what only its owner may read (file content, token hashes): it is made 0600,
    /// and an older one found looser is narrowed, its WAL and shared-memory files with it (SQLite gives
    /// those the database file's mode). Failures are left to the open that follows.
    private static func keepPrivate(_ path: String) {
        guard !path.isEmpty, path != ":memory:" else { return }
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        if fd >= 0 {
            close(fd)
            return
        }
        for file in [path, path + "-wal", path + "-shm"] {
            var info = stat()
            if stat(file, &info) == 0, info.st_mode & 0o077 != 0 { _ = chmod(file, info.st_mode & 0o700) }
        }
    }

    deinit {
        statements.removeAll()
        sqlite3_close_v2(handle)
    }

    func error(_ code: Int32, sql: String?) -> SQLiteError {
        SQLiteError(code: code, message: String(cString: sqlite3_errmsg(handle)), sql: sql, path: path)
    }

    /// Runs one or more statements that return no rows.
    public func execute(_ sql: String) throws(SQLiteError) {
        var message: UnsafeMutablePointer<CChar>?
        let status = sqlite3_exec(handle, sql, nil, nil, &message)
        if status != SQLITE_OK {
            let text = message.map { String(cString: $0) } ?? "error"
            sqlite3_free(message)
            throw SQLiteError(code: status, message: text, sql: sql, path: path)
        }
    }

    /// A prepared statement for `sql`, cached on this connection.
    public func prepare(_ sql: String) throws(SQLiteError) -> Statement {
        if let cached = statements[sql] {
            cached.reset()
            return cached
        }
        var raw: OpaquePointer?
        let status = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &raw, nil)
        guard status == SQLITE_OK, let raw else { throw error(status, sql: sql) }
        let statement = Statement(raw, database: self, sql: sql)
        statements[sql] = statement
        return statement
    }

    /// Runs `sql` with `arguments`, ignoring any rows.
    public func run(_ sql: String, _ arguments: any SQLBindable...) throws(SQLiteError) {
        let statement = try prepare(sql)
        try statement.bind(arguments)
        while try statement.step() {}
        statement.reset()
    }

    /// Calls `row` for each result row of `sql`.
    public func query(_ sql: String, _ arguments: any SQLBindable..., row: (Statement) throws -> Void) throws {
        let statement = try prepare(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        while try statement.step() { try row(statement) }
    }

    /// The first row's first column as an integer, nil when there is no row or it is NULL.
    public func scalar(_ sql: String, _ arguments: any SQLBindable...) throws(SQLiteError) -> Int64? {
        let statement = try prepare(sql)
        try statement.bind(arguments)
        defer { statement.reset() }
        guard try statement.step(), !statement.isNull(0) else { return nil }
        return statement.int64(0)
    }

    /// Runs `body`, which only reads, in one read transaction (`BEGIN`, deferred): one snapshot for
    /// all its queries, and one take and release of the WAL's read lock instead of one per statement
    /// (those `fcntl` calls were a tenth of an agent's CPU sending 10,000 small files). Inside a
    /// transaction it joins it.
    public func reading<T>(_ body: () throws -> T) throws -> T {
        if transactionDepth > 0 { return try body() }
        readOnly = true
        defer { readOnly = false }
        return try outermost("BEGIN", body)
    }

    /// Runs `body` in one transaction (`BEGIN IMMEDIATE`); nested calls join the outer one.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        assert(!readOnly, "bug: a write transaction inside a read-only one")
        if transactionDepth > 0 {
            transactionDepth += 1
            defer { transactionDepth -= 1 }
            return try body()
        }
        return try outermost("BEGIN IMMEDIATE", body)
    }

    /// Opens a transaction with `begin`, runs `body` in it and commits; rolls back if `body` throws.
    private func outermost<T>(_ begin: String, _ body: () throws -> T) throws -> T {
        try execute(begin)
        transactionDepth = 1
        do {
            let result = try body()
            transactionDepth = 0
            try execute("COMMIT")
            return result
        } catch {
            transactionDepth = 0
            try? execute("ROLLBACK")
            throw error
        }
    }

    public var changes: Int { Int(sqlite3_changes(handle)) }
    public var lastInsertRowID: Int64 { sqlite3_last_insert_rowid(handle) }

    /// The `user_version` pragma, used for schema migrations.
    public var userVersion: Int {
        get { Int((try? scalar("PRAGMA user_version")) ?? 0) }
    }

    public func setUserVersion(_ version: Int) throws(SQLiteError) {
        try execute("PRAGMA user_version = \(version)")
    }
}

/// A prepared statement owned by its connection's cache.
public final class Statement {
    let raw: OpaquePointer
    unowned let database: SQLiteDatabase
    let sql: String

    init(_ raw: OpaquePointer, database: SQLiteDatabase, sql: String) {
        self.raw = raw
        self.database = database
        self.sql = sql
    }

    deinit { sqlite3_finalize(raw) }

    public func reset() {
        sqlite3_reset(raw)
        sqlite3_clear_bindings(raw)
    }

    public func bind(_ values: [any SQLBindable]) throws(SQLiteError) {
        for (offset, value) in values.enumerated() {
            let index = Int32(offset + 1)
            let status: Int32
            switch value.sqlValue {
            case .null: status = sqlite3_bind_null(raw, index)
            case let .int(v): status = sqlite3_bind_int64(raw, index, v)
            case let .double(v): status = sqlite3_bind_double(raw, index, v)
            case let .text(v): status = sqlite3_bind_text(raw, index, v, -1, transient)
            case let .blob(v):
                status = v.withUnsafeBytes { sqlite3_bind_blob64(raw, index, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), sqlite3_uint64($0.count), transient) }
            }
            guard status == SQLITE_OK else { throw database.error(status, sql: sql) }
        }
    }

    /// Advances; true when a row is ready to read.
    public func step() throws(SQLiteError) -> Bool {
        let status = sqlite3_step(raw)
        switch status {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        default:
            let error = database.error(status, sql: sql)
            sqlite3_reset(raw)
            throw error
        }
    }

    public func isNull(_ column: Int32) -> Bool { sqlite3_column_type(raw, column) == SQLITE_NULL }
    public func int64(_ column: Int32) -> Int64 { sqlite3_column_int64(raw, column) }
    public func int(_ column: Int32) -> Int { Int(sqlite3_column_int64(raw, column)) }
    public func double(_ column: Int32) -> Double { sqlite3_column_double(raw, column) }
    public func bool(_ column: Int32) -> Bool { sqlite3_column_int64(raw, column) != 0 }

    public func text(_ column: Int32) -> String {
        guard let pointer = sqlite3_column_text(raw, column) else { return "" }
        let count = Int(sqlite3_column_bytes(raw, column))
        return String(decoding: UnsafeBufferPointer(start: pointer, count: count), as: UTF8.self)
    }

    public func optionalText(_ column: Int32) -> String? { isNull(column) ? nil : text(column) }
    public func optionalInt64(_ column: Int32) -> Int64? { isNull(column) ? nil : int64(column) }

    public func blob(_ column: Int32) -> [UInt8] {
        let count = Int(sqlite3_column_bytes(raw, column))
        guard count > 0, let pointer = sqlite3_column_blob(raw, column) else { return [] }
        return Array(UnsafeRawBufferPointer(start: pointer, count: count))
    }

    public func optionalBlob(_ column: Int32) -> [UInt8]? { isNull(column) ? nil : blob(column) }
}
