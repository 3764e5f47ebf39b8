/// Reduces a name that came from the network to a plain file name that is safe to create in a directory.
public enum SafeFileName {
    /// The last path component of `name`, with control characters removed, leading dots and surrounding spaces
    /// trimmed, at most 255 bytes long. `nil` when nothing usable is left (empty, `.`, `..`).
    ///
    /// Both `/` and `\` count as separators, so `..\..\evil.exe` becomes `evil.exe`.
    public static func sanitize(_ name: String) -> String? {
        let lastComponent = name.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var cleaned = String(
            String.UnicodeScalarView(
                lastComponent.unicodeScalars.filter { scalar in
                    !(scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value))
                }
            )
        )
        cleaned = String(Substring(cleaned).trimmingSpaces())
        while cleaned.hasPrefix(".") { cleaned.removeFirst() }
        cleaned = String(Substring(cleaned).trimmingSpaces())
        guard !cleaned.isEmpty else { return nil }
        while cleaned.utf8.count > 255 {
            cleaned.removeLast()
        }
        return cleaned
    }
}
