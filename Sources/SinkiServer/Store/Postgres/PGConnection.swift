import CPQ
import Glibc

/// A failed PostgreSQL call: what was being done, the server's SQL state when it sent one, its
/// message, and the statement (the database is named without its password).
public struct PostgresError: Error, Sendable, CustomStringConvertible {
    /// What failed: the connection, a statement, reading a value, or a call after close.
    public enum Kind: Sendable, Equatable {
        /// The connection could not be made, or was lost and could not be made again.
        case connect
        /// The server refused a statement (`sqlState` says why).
        case statement
        /// A value came back that this code cannot read (a bug, or a schema changed under it).
        case badValue
        /// A call after `close()`.
        case closed
    }

    public var kind: Kind
    /// The five-character SQLSTATE (`23505` unique violation, `40001` serialization failure, ...).
    public var sqlState: String?
    public var message: String
    public var sql: String?
    public var database: String

    public var description: String {
        var text = "postgresql \(database): \(message)"
        if let sqlState { text += " (SQLSTATE \(sqlState))" }
        if let sql { text += " in: \(sql.split(whereSeparator: \.isNewline).map { $0.trimmingPrefix(while: \.isWhitespace) }.joined(separator: " ").prefix(160))" }
        return text
    }

    /// The statement broke a unique constraint.
    public var isUniqueViolation: Bool { sqlState == "23505" }
}

/// A PostgreSQL type a parameter is sent as (its OID), so that the server never has to guess one (it
/// cannot for `$1 IS NULL`).
public enum PGType: UInt32, Sendable {
    case bool = 16, bytea = 17, int8 = 20, text = 25
}

/// A value bound to a statement parameter.
public enum PGValue: Sendable, Equatable {
    case null(PGType)
    case int(Int64)
    case bool(Bool)
    case text(String)
    case bytes([UInt8])
}

/// Converts Swift values into statement parameters.
public protocol PGBindable {
    static var pgType: PGType { get }
    var pgValue: PGValue { get }
}

extension Int64: PGBindable {
    public static var pgType: PGType { .int8 }
    public var pgValue: PGValue { .int(self) }
}
extension Int: PGBindable {
    public static var pgType: PGType { .int8 }
    public var pgValue: PGValue { .int(Int64(self)) }
}
extension UInt32: PGBindable {
    public static var pgType: PGType { .int8 }
    public var pgValue: PGValue { .int(Int64(self)) }
}
extension Bool: PGBindable {
    public static var pgType: PGType { .bool }
    public var pgValue: PGValue { .bool(self) }
}
extension String: PGBindable {
    public static var pgType: PGType { .text }
    public var pgValue: PGValue { .text(self) }
}
extension Array: PGBindable where Element == UInt8 {
    public static var pgType: PGType { .bytea }
    public var pgValue: PGValue { .bytes(self) }
}
extension Optional: PGBindable where Wrapped: PGBindable {
    public static var pgType: PGType { Wrapped.pgType }
    public var pgValue: PGValue { self?.pgValue ?? .null(Wrapped.pgType) }
}

/// A connection URL with any password replaced, for messages and logs.
public func redactedPostgresURL(_ url: String) -> String {
    guard let scheme = url.range(of: "://"), let at = url[scheme.upperBound...].lastIndex(of: "@") else { return url }
    let userInfo = url[scheme.upperBound..<at]
    guard let colon = userInfo.firstIndex(of: ":") else { return url }
    return String(url[..<colon]) + ":***" + String(url[at...])
}

/// One libpq connection (`PGconn`). Not Sendable: a connection belongs to one caller at a time (the
/// pool hands it out under a lock).
///
/// Statements with parameters are prepared once per connection (`PQprepare`, then `PQexecPrepared`):
/// the server parses and plans each of the store's few statements once instead of at every call,
/// about a third of its CPU per save. Parameters go as text, except byte strings, which go in binary
/// so that megabytes of inline content are neither escaped nor doubled; results come back as text.
public final class PGConnection {
    private var handle: OpaquePointer?
    /// Statement text to the name it was prepared under on this connection.
    private var prepared: [String: String] = [:]
    /// Beyond this many statements, more run unprepared: a caller building SQL text with values in it
    /// must not grow the server's memory without end.
    private static let preparedLimit = 256
    public let url: String
    /// The URL without its password.
    public let database: String

    /// Connects to `url` (`postgresql://user@host:port/db`, or any libpq connection string).
    public init(url: String) throws(PostgresError) {
        self.url = url
        database = redactedPostgresURL(url)
        // client_encoding pinned: records hold UTF-8 paths whatever the server's default; bytea_output
        // pinned: `PGResult.optionalBytes` reads the hex form only.
        let keywords = ["dbname", "client_encoding", "application_name", "options"]
        let values = [url, "UTF8", "sinkid", "-c bytea_output=hex"]
        let connection = withCStrings(keywords) { keys in
            withCStrings(values) { vals in PQconnectdbParams(keys, vals, 1) }
        }
        handle = connection
        guard let connection, PQstatus(connection) == CONNECTION_OK else {
            let message = connection.map { Self.text(PQerrorMessage($0)) } ?? "out of memory"
            if let connection { PQfinish(connection) }
            handle = nil
            throw PostgresError(kind: .connect, message: "cannot connect: \(message)", database: database)
        }
    }

    deinit { if let handle { PQfinish(handle) } }

    /// Closes the connection; any later call throws `.closed`.
    public func close() {
        if let handle { PQfinish(handle) }
        handle = nil
    }

    /// Whether the connection is open and usable (libpq notices a broken socket on the next call).
    public var isHealthy: Bool {
        guard let handle else { return false }
        return PQstatus(handle) == CONNECTION_OK
    }

    /// Whether no transaction is open or failed on the connection (a caller that threw between BEGIN
    /// and a ROLLBACK that failed too would leave one).
    public var isIdle: Bool {
        guard let handle else { return false }
        return PQtransactionStatus(handle) == PQTRANS_IDLE
    }

    /// Reconnects a broken connection with the same parameters.
    public func reset() throws(PostgresError) {
        guard let handle else { throw PostgresError(kind: .closed, message: "connection closed", database: database) }
        PQreset(handle)
        // A new session: the statements prepared on the old one are gone with it.
        prepared = [:]
        guard PQstatus(handle) == CONNECTION_OK else {
            throw PostgresError(kind: .connect, message: "cannot reconnect: \(Self.text(PQerrorMessage(handle)))", database: database)
        }
    }

    /// The connection's socket, for poll(2) while waiting for notifications; -1 when closed.
    public var socket: Int32 {
        guard let handle else { return -1 }
        return PQsocket(handle)
    }

    /// Reads what the server sent and returns the payloads of the notifications received since the
    /// last call (`LISTEN`).
    public func takeNotifications() throws(PostgresError) -> [String] {
        guard let handle else { throw PostgresError(kind: .closed, message: "connection closed", database: database) }
        guard PQconsumeInput(handle) == 1 else {
            throw PostgresError(kind: .connect, message: "lost: \(Self.text(PQerrorMessage(handle)))", database: database)
        }
        var payloads: [String] = []
        while let notification = PQnotifies(handle) {
            payloads.append(String(cString: notification.pointee.extra))
            PQfreemem(notification)
        }
        return payloads
    }

    /// Runs one statement with `$1`, `$2`, ... bound to `arguments`; the rows it returned.
    @discardableResult
    public func query(_ sql: String, _ arguments: [any PGBindable] = []) throws(PostgresError) -> PGResult {
        guard let handle else { throw PostgresError(kind: .closed, message: "connection closed", sql: sql, database: database) }
        let values = arguments.map(\.pgValue)
        let result = try Self.bound(values) { (types, pointers, lengths, formats) throws(PostgresError) -> OpaquePointer? in
            guard let name = try statement(sql, count: Int32(values.count), types: types) else {
                return PQexecParams(handle, sql, Int32(values.count), types, pointers, lengths, formats, 0)
            }
            return PQexecPrepared(handle, name, Int32(values.count), pointers, lengths, formats, 0)
        }
        guard let result else {
            throw PostgresError(kind: .connect, message: Self.text(PQerrorMessage(handle)), sql: sql, database: database)
        }
        let status = PQresultStatus(result)
        guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK else {
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            var message = Self.text(PQresultErrorMessage(result))
            if message.isEmpty { message = Self.text(PQerrorMessage(handle)) }
            PQclear(result)
            let kind: PostgresError.Kind = PQstatus(handle) == CONNECTION_OK ? .statement : .connect
            throw PostgresError(kind: kind, sqlState: state, message: message, sql: sql, database: database)
        }
        return PGResult(result, sql: sql, database: database)
    }

    /// The name `sql` is prepared under on this connection, preparing it on first use; nil past
    /// `preparedLimit`.
    private func statement(_ sql: String, count: Int32, types: UnsafePointer<UInt32>?) throws(PostgresError) -> String? {
        if let name = prepared[sql] { return name }
        guard prepared.count < Self.preparedLimit, let handle else { return nil }
        let name = "s\(prepared.count + 1)"
        guard let result = PQprepare(handle, name, sql, count, types) else {
            throw PostgresError(kind: .connect, message: Self.text(PQerrorMessage(handle)), sql: sql, database: database)
        }
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_COMMAND_OK else {
            let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
            throw PostgresError(kind: PQstatus(handle) == CONNECTION_OK ? .statement : .connect, sqlState: state,
                                message: Self.text(PQresultErrorMessage(result)), sql: sql, database: database)
        }
        prepared[sql] = name
        return name
    }

    /// Runs one statement; its values are ignored (it may hold several statements when it has no
    /// parameters: schema scripts).
    public func execute(_ sql: String, _ arguments: [any PGBindable] = []) throws(PostgresError) {
        if arguments.isEmpty {
            guard let handle else { throw PostgresError(kind: .closed, message: "connection closed", sql: sql, database: database) }
            // PQexec, not PQexecParams: only the simple protocol takes several statements at once.
            guard let result = PQexec(handle, sql) else {
                throw PostgresError(kind: .connect, message: Self.text(PQerrorMessage(handle)), sql: sql, database: database)
            }
            defer { PQclear(result) }
            let status = PQresultStatus(result)
            guard status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK else {
                let state = PQresultErrorField(result, Int32(UInt8(ascii: "C"))).map { String(cString: $0) }
                throw PostgresError(kind: PQstatus(handle) == CONNECTION_OK ? .statement : .connect, sqlState: state,
                                    message: Self.text(PQresultErrorMessage(result)), sql: sql, database: database)
            }
        } else {
            try query(sql, arguments)
        }
    }

    /// The first column of the first row as an integer; nil when there is no row or it is NULL.
    public func scalar(_ sql: String, _ arguments: any PGBindable...) throws(PostgresError) -> Int64? {
        let result = try query(sql, arguments)
        guard result.count > 0 else { return nil }
        return try result.optionalInt64(0, 0)
    }

    /// Runs `body` in one transaction: committed when it returns, rolled back when it throws.
    public func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN")
        let value: T
        do {
            value = try body()
        } catch {
            // A failed rollback leaves nothing to keep: the server drops the transaction with the
            // connection, and the pool resets a broken one.
            try? execute("ROLLBACK")
            throw error
        }
        try execute("COMMIT")
        return value
    }

    private static func text(_ pointer: UnsafeMutablePointer<CChar>?) -> String {
        guard let pointer else { return "" }
        var message = String(cString: pointer)
        while message.last?.isNewline == true { message.removeLast() }
        return message
    }

    /// Calls `body` with libpq's four parallel parameter arrays, all pointing into one buffer that
    /// lives for the call.
    private static func bound<T, E: Error>(_ values: [PGValue],
                                           _ body: (UnsafePointer<UInt32>?, UnsafePointer<UnsafePointer<CChar>?>?, UnsafePointer<Int32>?,
                                                    UnsafePointer<Int32>?) throws(E) -> T) throws(E) -> T {
        var buffer: [CChar] = []
        var offsets: [Int?] = []
        var types: [UInt32] = []
        var lengths: [Int32] = []
        var formats: [Int32] = []
        for value in values {
            switch value {
            case let .null(type):
                offsets.append(nil)
                types.append(type.rawValue)
                lengths.append(0)
                formats.append(0)
                continue
            case let .bytes(bytes):
                offsets.append(buffer.count)
                buffer.append(contentsOf: bytes.lazy.map { CChar(bitPattern: $0) })
                types.append(PGType.bytea.rawValue)
                lengths.append(Int32(bytes.count))
                formats.append(1)
                continue
            case let .int(number):
                offsets.append(buffer.count)
                buffer.append(contentsOf: String(number).utf8CString.dropLast())
                types.append(PGType.int8.rawValue)
            case let .bool(flag):
                offsets.append(buffer.count)
                buffer.append(CChar(UInt8(ascii: flag ? "t" : "f")))
                types.append(PGType.bool.rawValue)
            case let .text(string):
                offsets.append(buffer.count)
                buffer.append(contentsOf: string.utf8CString.dropLast())
                types.append(PGType.text.rawValue)
            }
            buffer.append(0)
            lengths.append(0)
            formats.append(0)
        }
        if buffer.isEmpty { buffer.append(0) }
        return try buffer.withUnsafeBufferPointer { (base) throws(E) -> T in
            let pointers: [UnsafePointer<CChar>?] = offsets.map { offset in offset.map { base.baseAddress! + $0 } }
            return try body(types, pointers, lengths, formats)
        }
    }
}

/// Calls `body` with a NULL-terminated array of C strings.
private func withCStrings<T>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> T) -> T {
    let copies = strings.map { strdup($0) }
    defer { for copy in copies { free(copy) } }
    let pointers: [UnsafePointer<CChar>?] = copies.map { $0.map { UnsafePointer($0) } } + [nil]
    return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
}

/// The rows of one statement (`PGresult`), read in place and freed with this object. Not Sendable:
/// it belongs to the caller that ran the statement.
public final class PGResult {
    private let result: OpaquePointer
    private let sql: String
    private let database: String
    /// Rows returned.
    public let count: Int

    init(_ result: OpaquePointer, sql: String, database: String) {
        self.result = result
        self.sql = sql
        self.database = database
        count = Int(PQntuples(result))
    }

    deinit { PQclear(result) }

    /// Rows a command changed (`INSERT`, `UPDATE`, `DELETE`).
    public var affected: Int { Int(String(cString: PQcmdTuples(result))) ?? 0 }

    public func isNull(_ row: Int, _ column: Int) -> Bool { PQgetisnull(result, Int32(row), Int32(column)) == 1 }

    private func bad(_ row: Int, _ column: Int, _ what: String) -> PostgresError {
        PostgresError(kind: .badValue, message: "row \(row) column \(column): \(what)", sql: sql, database: database)
    }

    public func optionalText(_ row: Int, _ column: Int) -> String? {
        isNull(row, column) ? nil : String(cString: PQgetvalue(result, Int32(row), Int32(column)))
    }

    public func text(_ row: Int, _ column: Int) throws(PostgresError) -> String {
        guard let value = optionalText(row, column) else { throw bad(row, column, "NULL where text was expected") }
        return value
    }

    public func optionalInt64(_ row: Int, _ column: Int) throws(PostgresError) -> Int64? {
        guard let text = optionalText(row, column) else { return nil }
        guard let value = Int64(text) else { throw bad(row, column, "\(text.prefix(40)) is not an integer") }
        return value
    }

    public func int64(_ row: Int, _ column: Int) throws(PostgresError) -> Int64 {
        guard let value = try optionalInt64(row, column) else { throw bad(row, column, "NULL where an integer was expected") }
        return value
    }

    public func bool(_ row: Int, _ column: Int) throws(PostgresError) -> Bool {
        switch optionalText(row, column) {
        case "t": return true
        case "f": return false
        case let other: throw bad(row, column, "\(other ?? "NULL") is not a boolean")
        }
    }

    /// A `bytea` in text form (`\x` and hex digits, PostgreSQL's default output), decoded in place.
    public func optionalBytes(_ row: Int, _ column: Int) throws(PostgresError) -> [UInt8]? {
        if isNull(row, column) { return nil }
        let length = Int(PQgetlength(result, Int32(row), Int32(column)))
        guard let pointer = PQgetvalue(result, Int32(row), Int32(column)) else { return nil }
        let raw = UnsafeRawPointer(pointer).assumingMemoryBound(to: UInt8.self)
        guard length >= 2, raw[0] == UInt8(ascii: "\\"), raw[1] == UInt8(ascii: "x"), length % 2 == 0 else {
            throw bad(row, column, "bytea not in hex form (bytea_output must be hex)")
        }
        let count = (length - 2) / 2
        var valid = true
        let bytes = [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            for index in 0..<count {
                let high = Self.nibble(raw[2 + 2 * index]), low = Self.nibble(raw[3 + 2 * index])
                if high > 15 || low > 15 { valid = false }
                buffer[index] = high << 4 | (low & 15)
            }
            initialized = count
        }
        guard valid else { throw bad(row, column, "bytea holds a character that is not a hex digit") }
        return bytes
    }

    private static func nibble(_ c: UInt8) -> UInt8 {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return 255
        }
    }
}
