/// The members of a JSON object in the order they were parsed or added.
///
/// Looking a key up is a linear search (JSON-RPC objects are small); when a key repeats, the last one counts, as
/// in aria2's parser.
public struct JSONObject: Sendable, Hashable {
    /// One member of an object.
    public struct Member: Sendable, Hashable {
        public var key: String
        public var value: JSONValue

        public init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    /// The members, in order.
    public var members: [Member]

    public init(_ members: [Member] = []) {
        self.members = members
    }

    /// The value of the last member named `key`.
    public subscript(key: String) -> JSONValue? {
        for member in self.members.reversed() where member.key == key {
            return member.value
        }
        return nil
    }

    /// Appends a member (no check for an existing one of the same name).
    public mutating func append(_ key: String, _ value: JSONValue) {
        self.members.append(Member(key: key, value: value))
    }

    public var count: Int { self.members.count }
}
