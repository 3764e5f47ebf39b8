/// The members of a JSON object in the order they were parsed or added.
///
/// Looking a key up is a linear search (JSON-RPC objects are small); when a key repeats, the last one counts, as
/// in aria2's parser.
package struct JSONObject: Sendable, Hashable {
    /// One member of an object.
    package struct Member: Sendable, Hashable {
        package var key: String
        package var value: JSONValue

        package init(key: String, value: JSONValue) {
            self.key = key
            self.value = value
        }
    }

    /// The members, in order.
    package var members: [Member]

    package init(_ members: [Member] = []) {
        self.members = members
    }

    /// The value of the last member named `key`.
    package subscript(key: String) -> JSONValue? {
        for member in self.members.reversed() where member.key == key {
            return member.value
        }
        return nil
    }

    /// Appends a member (no check for an existing one of the same name).
    package mutating func append(_ key: String, _ value: JSONValue) {
        self.members.append(Member(key: key, value: value))
    }

    package var count: Int { self.members.count }
}
