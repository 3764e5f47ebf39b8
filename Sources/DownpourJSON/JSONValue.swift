/// A JSON value as aria2's JSON-RPC sees it.
///
/// Numbers are kept as integers when they are written as integers and fit in 64 bits; anything else (a fraction,
/// an exponent, a huge integer) is a ``double(_:)``, which the RPC layer reads by its integer part, as aria2 does.
/// Objects keep their members in order (``JSONObject``), so a response is written in the order it was built.
package enum JSONValue: Sendable, Hashable {
    case null
    case bool(Bool)
    case integer(Int64)
    case double(Double)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// The string, when this is one.
    package var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The integer part of a number that fits in an `Int64`; `nil` for anything else.
    package var integerValue: Int64? {
        switch self {
        case .integer(let value): return value
        case .double(let value):
            guard value.isFinite, value > -9.223_372_036_854_775_808e18, value < 9.223_372_036_854_775_808e18 else {
                return nil
            }
            return Int64(value.rounded(.towardZero))
        default: return nil
        }
    }

    /// The elements, when this is an array.
    package var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The members, when this is an object.
    package var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral
{
    package init(stringLiteral value: String) { self = .string(value) }
    package init(integerLiteral value: Int64) { self = .integer(value) }
    package init(floatLiteral value: Double) { self = .double(value) }
    package init(booleanLiteral value: Bool) { self = .bool(value) }
    package init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    package init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(JSONObject(elements.map { JSONObject.Member(key: $0.0, value: $0.1) }))
    }
    package init(nilLiteral: ()) { self = .null }
}
