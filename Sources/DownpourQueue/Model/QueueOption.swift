/// One option of a queued download or of the queue, by aria2's name (`dir`, `out`, `split`, `header`, ...) with
/// its value as text, the way aria2's RPC and input files give it. A name may repeat (`header`).
public struct QueueOption: Sendable, Hashable, Codable {
    /// aria2's name, without the leading `--`.
    public var name: String
    /// The value as text.
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}
