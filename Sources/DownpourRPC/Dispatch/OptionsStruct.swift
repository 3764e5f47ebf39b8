import Downpour
import DownpourAria2
import DownpourJSON
import DownpourQueue

/// aria2's options struct (`{"dir":"/downloads","header":["A: 1","B: 2"]}`) to and from ``QueueOption``s.
enum OptionsStruct {
    /// The options of a struct, in order. Values are strings; an array gives one option per string (aria2 takes
    /// arrays for `header` and `index-out`, the options that may repeat; Downpour takes them for any name);
    /// JSON booleans and numbers are turned into their text (aria2 ignores them silently, which surprises
    /// clients); `null`s and objects are skipped. Names are passed on unchecked: the queue judges them; but an
    /// option Downpour only answers (``Aria2FixedOption``) is taken out when its value is the one Downpour has, and
    /// refused otherwise, with an error that names it and says why.
    ///
    /// - Throws: ``RPCError`` for a fixed option set to a value Downpour cannot honour.
    static func options(from object: JSONObject) throws(RPCError) -> [QueueOption] {
        var options: [QueueOption] = []
        for option in Self.allOptions(from: object) {
            guard let fixed = Aria2FixedOption.named(option.name) else {
                options.append(option)
                continue
            }
            guard fixed.accepts(option.value) else { throw .method(fixed.message(for: option.value)) }
        }
        return options
    }

    private static func allOptions(from object: JSONObject) -> [QueueOption] {
        var options: [QueueOption] = []
        options.reserveCapacity(object.count)
        for member in object.members {
            switch member.value {
            case .array(let values):
                for value in values {
                    if let text = Self.text(of: value) { options.append(QueueOption(name: member.key, value: text)) }
                }
            default:
                if let text = Self.text(of: member.value) {
                    options.append(QueueOption(name: member.key, value: text))
                }
            }
        }
        return options
    }

    private static func text(of value: JSONValue) -> String? {
        switch value {
        case .string(let text): return text
        case .bool(let flag): return flag ? "true" : "false"
        case .integer(let number): return String(number)
        case .double(let number):
            guard number.isFinite else { return nil }
            if number == number.rounded(.towardZero), abs(number) < 9e18 { return String(Int64(number)) }
            return String(number)
        case .null, .array, .object: return nil
        }
    }

    /// The struct of options: one member per name, repeated names (`header`) joined by a newline as aria2 does.
    static func object(from options: [QueueOption]) -> JSONValue {
        var object = JSONObject()
        var indexByName: [String: Int] = [:]
        for option in options {
            if let index = indexByName[option.name], case .string(let existing) = object.members[index].value {
                object.members[index].value = .string(existing + "\n" + option.value)
            } else {
                indexByName[option.name] = object.count
                object.append(option.name, .string(option.value))
            }
        }
        return .object(object)
    }
}
