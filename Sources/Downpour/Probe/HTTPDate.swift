/// HTTP dates to seconds since 1970, without Foundation's formatters.
///
/// Reads the three forms HTTP allows (RFC 9110 §5.6.7) — IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`), RFC 850
/// (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`) — and the cookie dates browsers
/// accept (`Wed, 21-Oct-2026 07:28:00 GMT`), with the algorithm of RFC 6265 §5.1.1: split at delimiters, then the
/// first token that looks like a time, a day of the month, a month name and a year, in any order. Always UTC.
enum HTTPDate {
    static func parse(_ text: String) -> Double? {
        var time: (hour: Int, minute: Int, second: Int)?
        var day: Int?
        var month: Int?
        var year: Int?
        for token in Self.tokens(text) {
            if time == nil, let parsed = Self.time(token) {
                time = parsed
            } else if day == nil, let number = Self.leadingNumber(token, digits: 1...2) {
                day = number
            } else if month == nil, let index = Self.month(token) {
                month = index
            } else if year == nil, let number = Self.leadingNumber(token, digits: 2...4) {
                year = number
            }
        }
        guard let time, let day, let month, var year else { return nil }
        if (70...99).contains(year) { year += 1900 } else if (0...69).contains(year) { year += 2000 }
        guard (1...31).contains(day), year >= 1601, time.hour <= 23, time.minute <= 59, time.second <= 59 else {
            return nil
        }
        // Days from civil date (Howard Hinnant's algorithm).
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        let days = era * 146097 + dayOfEra - 719468
        return Double(days * 86400 + time.hour * 3600 + time.minute * 60 + time.second)
    }

    /// `seconds` since 1970 as an IMF-fixdate.
    static func format(_ seconds: Int64) -> String {
        let days = seconds >= 0 ? seconds / 86400 : (seconds - 86399) / 86400
        let secondOfDay = seconds - days * 86400
        // Civil date from days (Howard Hinnant's algorithm).
        let z = days + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let dayOfEra = z - era * 146097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        let weekday = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"][Int(((days % 7) + 7) % 7)]
        func two(_ value: Int64) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(weekday), \(two(day)) \(Self.months[Int(month) - 1]) \(year) "
            + "\(two(secondOfDay / 3600)):\(two(secondOfDay % 3600 / 60)):\(two(secondOfDay % 60)) GMT"
    }

    private static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    /// RFC 6265's delimiters: everything but digits, letters and `:`, outside the control characters.
    private static func tokens(_ text: String) -> [Substring.UTF8View] {
        func isDelimiter(_ byte: UInt8) -> Bool {
            byte == 0x09 || (0x20...0x2F).contains(byte) || (0x3B...0x40).contains(byte)
                || (0x5B...0x60).contains(byte) || (0x7B...0x7E).contains(byte)
        }
        return Substring(text).utf8.split(whereSeparator: isDelimiter)
    }

    private static func isDigit(_ byte: UInt8) -> Bool {
        byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
    }

    /// The number of `digits` digits the token starts with, when no further digit follows them.
    private static func leadingNumber(_ token: Substring.UTF8View, digits: ClosedRange<Int>) -> Int? {
        let prefix = token.prefix(while: Self.isDigit)
        guard digits.contains(prefix.count) else { return nil }
        return prefix.reduce(0) { $0 * 10 + Int($1 - UInt8(ascii: "0")) }
    }

    /// `h:m:s`, one or two digits each, possibly followed by something that is not a digit.
    private static func time(_ token: Substring.UTF8View) -> (hour: Int, minute: Int, second: Int)? {
        let parts = token.split(separator: UInt8(ascii: ":"), maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0].allSatisfy(Self.isDigit), parts[1].allSatisfy(Self.isDigit),
            let hour = Self.leadingNumber(parts[0], digits: 1...2),
            let minute = Self.leadingNumber(parts[1], digits: 1...2),
            let second = Self.leadingNumber(parts[2], digits: 1...2)
        else { return nil }
        return (hour, minute, second)
    }

    private static func month(_ token: Substring.UTF8View) -> Int? {
        guard token.count >= 3 else { return nil }
        let name = String(decoding: token.prefix(3), as: UTF8.self).lowercased()
        return Self.months.firstIndex { $0.lowercased() == name }.map { $0 + 1 }
    }
}
