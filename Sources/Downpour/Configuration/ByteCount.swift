/// Parses sizes written by people: `1048576`, `512K`, `1M`, `1.5G` (binary units: K = 1024).
public enum ByteCount {
    public static func parse(_ text: String) -> Int64? {
        var digits = Substring(text).trimmingSpaces()
        guard !digits.isEmpty else { return nil }
        var multiplier: Double = 1
        if let last = digits.last, last.isLetter {
            switch last.uppercased() {
            case "K": multiplier = 1024
            case "M": multiplier = 1024 * 1024
            case "G": multiplier = 1024 * 1024 * 1024
            case "T": multiplier = 1024 * 1024 * 1024 * 1024
            default: return nil
            }
            digits.removeLast()
            if digits.last == "i" || digits.last == "I" { return nil }
        }
        guard !digits.isEmpty, digits.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
            let value = Double(digits), value.isFinite, value >= 0
        else { return nil }
        let bytes = (value * multiplier).rounded()
        guard bytes <= Double(Int64.max / 2) else { return nil }
        return Int64(bytes)
    }

    /// `1.5 MiB`-style text for people.
    public static func format(_ bytes: Int64) -> String {
        let units = ["B", "KiB", "MiB", "GiB", "TiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(bytes) B" }
        return formatDecimal(value, digits: value < 10 ? 2 : (value < 100 ? 1 : 0)) + " " + units[unit]
    }

    /// `1.5 MiB/s`-style text for a speed in bytes per second.
    public static func formatRate(_ bytesPerSecond: Double) -> String {
        guard bytesPerSecond.isFinite else { return "-" }
        return self.format(Int64(max(bytesPerSecond, 0).rounded())) + "/s"
    }
}

/// Formats `value` with a fixed number of fraction digits, without Foundation.
func formatDecimal(_ value: Double, digits: Int) -> String {
    guard value.isFinite else { return "-" }
    var scale = 1.0
    for _ in 0..<digits { scale *= 10 }
    let scaled = Int64((abs(value) * scale).rounded())
    let whole = scaled / Int64(scale)
    let fraction = scaled % Int64(scale)
    var text = (value < 0 && scaled != 0 ? "-" : "") + String(whole)
    if digits > 0 {
        let fractionText = String(fraction)
        text += "." + String(repeating: "0", count: digits - fractionText.count) + fractionText
    }
    return text
}
