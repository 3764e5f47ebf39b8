import DownpourJSON

/// A call's positional parameters after the token, read with aria2's checks (`checkParam`): a parameter of the
/// wrong JSON type is "The parameter at N has wrong type.", a missing required one "... is required but
/// missing.". A JSON `null` for an optional parameter counts as absent (aria2 calls it the wrong type; being
/// lenient there breaks no client).
struct RPCParameters: Sendable {
    var values: [JSONValue]

    private func value(at index: Int, required: Bool) throws(RPCError) -> JSONValue? {
        guard index < self.values.count else {
            if required { throw RPCError.missing(at: index) }
            return nil
        }
        let value = self.values[index]
        if case .null = value {
            if required { throw RPCError.wrongType(at: index) }
            return nil
        }
        return value
    }

    func string(at index: Int, required: Bool = false) throws(RPCError) -> String? {
        guard let value = try self.value(at: index, required: required) else { return nil }
        guard case .string(let string) = value else { throw RPCError.wrongType(at: index) }
        return string
    }

    func requiredString(at index: Int) throws(RPCError) -> String {
        try self.string(at: index, required: true) ?? ""
    }

    func integer(at index: Int, required: Bool = false) throws(RPCError) -> Int64? {
        guard let value = try self.value(at: index, required: required) else { return nil }
        guard let integer = value.integerValue else { throw RPCError.wrongType(at: index) }
        return integer
    }

    func requiredInteger(at index: Int) throws(RPCError) -> Int64 {
        try self.integer(at: index, required: true) ?? 0
    }

    func array(at index: Int, required: Bool = false) throws(RPCError) -> [JSONValue]? {
        guard let value = try self.value(at: index, required: required) else { return nil }
        guard case .array(let array) = value else { throw RPCError.wrongType(at: index) }
        return array
    }

    /// The strings of an array parameter; other elements are skipped, as aria2's `toStringList` does.
    func strings(at index: Int, required: Bool = false) throws(RPCError) -> [String]? {
        try self.array(at: index, required: required).map { $0.compactMap(\.stringValue) }
    }

    func object(at index: Int, required: Bool = false) throws(RPCError) -> JSONObject? {
        guard let value = try self.value(at: index, required: required) else { return nil }
        guard case .object(let object) = value else { throw RPCError.wrongType(at: index) }
        return object
    }

    /// A `position` parameter: absent, or an integer ≥ 0.
    func position(at index: Int) throws(RPCError) -> Int? {
        guard let position = try self.integer(at: index) else { return nil }
        guard position >= 0 else { throw RPCError.method("Position must be greater than or equal to 0.") }
        return Int(clamping: position)
    }
}
