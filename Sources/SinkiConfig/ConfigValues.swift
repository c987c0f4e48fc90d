/// Parsers for the value syntax of `sinki.conf`: sizes, durations, booleans, lists, quoted strings,
/// home-relative paths and command lines. Each answers nil (or throws `ValueError`) on a bad value;
/// the config parser adds the file and line.
public enum ConfigValues {
    /// Bytes in each size unit; units are case-insensitive. KB/MB/GB/TB are decimal, KiB/MiB/GiB/TiB binary.
    static let sizeUnits: [String: Int64] = [
        "": 1, "b": 1,
        "kb": 1000, "mb": 1_000_000, "gb": 1_000_000_000, "tb": 1_000_000_000_000,
        "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
    ]

    /// Nanoseconds in each duration unit.
    static let durationUnits: [String: Int64] = [
        "ms": 1_000_000, "s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000, "d": 86_400_000_000_000,
    ]

    /// A size such as `256KiB`, `8 MiB`, `1.5MB` or `4096` (bytes); nil when it is not one.
    /// A fraction of a byte is dropped (`1.5KB` is 1500, `0.3KiB` is 307).
    public static func size(_ text: String) -> Int64? {
        let scalars = Array(text.unicodeScalars)
        var index = 0
        guard let number = decimal(scalars, &index, maxFractionDigits: 6) else { return nil }
        while index < scalars.count, scalars[index] == " " { index += 1 }
        let unit = String(String.UnicodeScalarView(scalars[index...])).lowercased()
        guard let multiplier = sizeUnits[unit] else { return nil }
        if multiplier == 1, number.fractionDigits > 0 { return nil }
        return number.times(multiplier)
    }

    /// A duration such as `50ms`, `2s`, `30m`, `1h`, `1d`, `1.5s` or `1h 30m`; a bare `0` is zero.
    /// nil when it is not one (a number without a unit is refused: seconds or milliseconds?).
    public static func duration(_ text: String) -> Duration? {
        let scalars = Array(text.unicodeScalars).filter { $0 != " " }
        if scalars == ["0"] { return .zero }
        var index = 0
        var total: Int64 = 0
        guard !scalars.isEmpty else { return nil }
        while index < scalars.count {
            guard let number = decimal(scalars, &index, maxFractionDigits: 3) else { return nil }
            var unit = ""
            while index < scalars.count, scalars[index].properties.isAlphabetic {
                unit.unicodeScalars.append(scalars[index])
                index += 1
            }
            guard let nanos = durationUnits[unit], let part = number.times(nanos) else { return nil }
            let (sum, overflow) = total.addingReportingOverflow(part)
            if overflow { return nil }
            total = sum
        }
        return .nanoseconds(total)
    }

    /// `yes`/`no`, `true`/`false`, `on`/`off` in any case; nil for anything else.
    public static func bool(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "yes", "true", "on": return true
        case "no", "false", "off": return false
        default: return nil
        }
    }

    /// Splits a command line into argv with shell-like quoting, without a shell: `'…'` is literal,
    /// `"…"` honours `\"`, `\\`, `\$` and `` \` ``, a backslash outside quotes escapes the next
    /// character, and an unquoted `#` at the start of a word begins a comment. Nothing is expanded:
    /// `$VAR`, `*` and `%local` stay as written.
    public static func splitCommand(_ text: String) throws(ValueError) -> [String] {
        var words: [String] = []
        var word = ""
        var inWord = false
        var iterator = Array(text.unicodeScalars).makeIterator()
        func finish() {
            if inWord { words.append(word) }
            word = ""
            inWord = false
        }
        while let scalar = iterator.next() {
            switch scalar {
            case " ", "\t":
                finish()
            case "#" where !inWord:
                return words
            case "'":
                inWord = true
                while true {
                    guard let next = iterator.next() else { throw ValueError("unterminated ' quote") }
                    if next == "'" { break }
                    word.unicodeScalars.append(next)
                }
            case "\"":
                inWord = true
                while true {
                    guard let next = iterator.next() else { throw ValueError("unterminated \" quote") }
                    if next == "\"" { break }
                    if next == "\\" {
                        guard let escaped = iterator.next() else { throw ValueError("unterminated \" quote") }
                        if !"\"\\$`".unicodeScalars.contains(escaped) { word.unicodeScalars.append("\\") }
                        word.unicodeScalars.append(escaped)
                    } else {
                        word.unicodeScalars.append(next)
                    }
                }
            case "\\":
                guard let escaped = iterator.next() else { throw ValueError("ends with a lone backslash") }
                inWord = true
                word.unicodeScalars.append(escaped)
            default:
                inWord = true
                word.unicodeScalars.append(scalar)
            }
        }
        finish()
        return words
    }

    /// A single value: the text after `=` up to an inline comment (a `#` after a space or tab), or one
    /// string wrapped in `"…"` or `'…'` (which may then hold `#` and spaces at its ends). Quotes in
    /// the middle of a value are ordinary characters.
    static func scalar(_ rest: String) throws(ValueError) -> String {
        var scanner = ValueScanner(rest)
        scanner.skipSpaces()
        let value = try scanner.item(stopAtComma: false)
        scanner.skipSpaces()
        guard scanner.atEndOrComment else { throw ValueError("unexpected text after the closing quote") }
        return value
    }

    /// A comma-separated list; each item is trimmed and may be quoted like a single value; `\,` is a
    /// comma inside an item; empty items are dropped.
    static func list(_ rest: String) throws(ValueError) -> [String] {
        var scanner = ValueScanner(rest)
        var items: [String] = []
        while true {
            scanner.skipSpaces()
            if scanner.atEndOrComment { break }
            let item = try scanner.item(stopAtComma: true)
            if !item.isEmpty { items.append(item) }
            scanner.skipSpaces()
            if scanner.atEndOrComment { break }
            guard scanner.take(",") else { throw ValueError("expected a comma after the closing quote") }
        }
        return items
    }

    /// Replaces a leading `~`, `$HOME` or `${HOME}` by `home`. `~user` is refused.
    static func expandHome(_ path: String, home: String?) throws(ValueError) -> String {
        for prefix in ["~", "${HOME}", "$HOME"] where path.hasPrefix(prefix) {
            let rest = path.dropFirst(prefix.count)
            if !rest.isEmpty, !rest.hasPrefix("/") {
                if prefix == "~" { throw ValueError("\"~user\" paths are not supported; write the full path") }
                continue
            }
            guard let home, !home.isEmpty else { throw ValueError("cannot expand \(prefix): HOME is not set") }
            return home + rest
        }
        return path
    }

    /// `path` made absolute against `directory` and cleaned lexically: no `.`, `..`, doubled or
    /// trailing `/` (symlinks are not resolved).
    static func absolute(_ path: String, from directory: String) -> String {
        let joined = path.hasPrefix("/") ? path : directory + "/" + path
        var parts: [Substring] = []
        for part in joined.split(separator: "/") {
            if part == "." { continue }
            if part == ".." { _ = parts.popLast(); continue }
            parts.append(part)
        }
        return "/" + parts.joined(separator: "/")
    }

    /// A non-negative decimal number read at `index`: integer and fraction digits kept exactly.
    private static func decimal(_ scalars: [Unicode.Scalar], _ index: inout Int, maxFractionDigits: Int) -> Decimal? {
        var whole: Int64 = 0
        var fraction: Int64 = 0
        var fractionDigits = 0
        var digits = 0
        func digit(at index: Int) -> Int64? {
            guard index < scalars.count, ("0"..."9").contains(scalars[index]) else { return nil }
            return Int64(scalars[index].value - 48)
        }
        while let digit = digit(at: index) {
            let (times, overflow1) = whole.multipliedReportingOverflow(by: 10)
            let (sum, overflow2) = times.addingReportingOverflow(digit)
            if overflow1 || overflow2 { return nil }
            whole = sum
            digits += 1
            index += 1
        }
        if index < scalars.count, scalars[index] == "." {
            index += 1
            while let digit = digit(at: index) {
                guard fractionDigits < maxFractionDigits else { return nil }
                fraction = fraction * 10 + digit
                fractionDigits += 1
                index += 1
            }
            if fractionDigits == 0 { return nil }
        }
        return digits > 0 ? Decimal(whole: whole, fraction: fraction, fractionDigits: fractionDigits) : nil
    }

    /// A number as `whole.fraction`, multiplied exactly by a unit.
    private struct Decimal {
        var whole: Int64
        var fraction: Int64
        var fractionDigits: Int

        func times(_ unit: Int64) -> Int64? {
            let (wholePart, overflow1) = whole.multipliedReportingOverflow(by: unit)
            var scale: Int64 = 1
            for _ in 0..<fractionDigits { scale *= 10 }
            let (fractionPart, overflow2) = fraction.multipliedReportingOverflow(by: unit)
            let (sum, overflow3) = wholePart.addingReportingOverflow(fractionPart / scale)
            return overflow1 || overflow2 || overflow3 ? nil : sum
        }
    }
}

/// Why a value could not be read; the parser prefixes it with the file, line and key.
public struct ValueError: Error, Sendable, Equatable {
    public var message: String
    public init(_ message: String) { self.message = message }
}

/// Reads single values and list items from the text after `=`.
private struct ValueScanner {
    let scalars: [Unicode.Scalar]
    var index = 0

    init(_ text: String) { scalars = Array(text.unicodeScalars) }

    var atEnd: Bool { index >= scalars.count }

    /// At the end, or at a `#` that follows a space (the scanner only stops here after spaces).
    var atEndOrComment: Bool {
        atEnd || (scalars[index] == "#" && index > 0 && (scalars[index - 1] == " " || scalars[index - 1] == "\t"))
    }

    mutating func skipSpaces() {
        while !atEnd, scalars[index] == " " || scalars[index] == "\t" { index += 1 }
    }

    mutating func take(_ scalar: Unicode.Scalar) -> Bool {
        guard !atEnd, scalars[index] == scalar else { return false }
        index += 1
        return true
    }

    /// One value or item, quoted or bare, with trailing spaces removed.
    mutating func item(stopAtComma: Bool) throws(ValueError) -> String {
        if atEndOrComment { return "" }
        if !atEnd, scalars[index] == "\"" || scalars[index] == "'" { return try quoted() }
        var out = String.UnicodeScalarView()
        var trailingSpaces = 0
        while !atEnd {
            let scalar = scalars[index]
            if scalar == "#", trailingSpaces > 0 { break }
            if stopAtComma, scalar == "," { break }
            if stopAtComma, scalar == "\\", index + 1 < scalars.count, scalars[index + 1] == "," {
                index += 1
            }
            out.append(scalars[index])
            trailingSpaces = scalar == " " || scalar == "\t" ? trailingSpaces + 1 : 0
            index += 1
        }
        index -= trailingSpaces
        return String(String.UnicodeScalarView(out.dropLast(trailingSpaces)))
    }

    /// A `"…"` (with `\"` and `\\`) or `'…'` string.
    private mutating func quoted() throws(ValueError) -> String {
        let quote = scalars[index]
        index += 1
        var out = String.UnicodeScalarView()
        while true {
            guard !atEnd else { throw ValueError("unterminated \(quote) quote") }
            let scalar = scalars[index]
            index += 1
            if scalar == quote { return String(out) }
            if quote == "\"", scalar == "\\", !atEnd, scalars[index] == "\"" || scalars[index] == "\\" {
                out.append(scalars[index])
                index += 1
            } else {
                out.append(scalar)
            }
        }
    }
}
