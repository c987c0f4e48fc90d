/// Sizes and durations as people read them, the same in `sinkid status`, the log and systemd.
public enum HumanUnits {
    /// `512 B`, `3.4 KiB`, `12.0 MiB`, `1.2 GiB`.
    public static func bytes(_ count: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(count)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return unit == 0 ? "\(count) B" : "\(oneDecimal(value)) \(units[unit])"
    }

    /// `4s`, `12m`, `3h 5m`, `2d 4h`.
    public static func duration(_ seconds: Double) -> String {
        let total = Int(max(0, seconds).rounded())
        if total < 60 { return "\(total)s" }
        if total < 3600 { return "\(total / 60)m" + (total % 60 > 0 && total < 600 ? " \(total % 60)s" : "") }
        if total < 86400 { return "\(total / 3600)h" + (total % 3600 / 60 > 0 ? " \(total % 3600 / 60)m" : "") }
        return "\(total / 86400)d" + (total % 86400 / 3600 > 0 ? " \(total % 86400 / 3600)h" : "")
    }

    /// `12,345`.
    public static func grouped(_ number: Int) -> String {
        let digits = String(number.magnitude)
        var out = ""
        for (index, digit) in digits.reversed().enumerated() {
            if index > 0 && index % 3 == 0 { out.append(",") }
            out.append(digit)
        }
        return (number < 0 ? "-" : "") + String(out.reversed())
    }

    public static func oneDecimal(_ value: Double) -> String {
        let tenths = Int((value * 10).rounded())
        return "\(tenths / 10).\(tenths % 10)"
    }
}
