import DownpourJSON
import Foundation

#if canImport(FoundationXML)
import FoundationXML
#endif

/// One XML-RPC call, `<methodCall>` with its `<methodName>` and `<params>`, read by Foundation's `XMLParser`
/// (libxml2) into the values JSON-RPC has, so that ``RPCCall`` reads it as it reads a JSON call (§10 of
/// `shared/aria2-rpc.md`):
///
/// | XML-RPC | value |
/// |---|---|
/// | `<int>`, `<i4>`, `<i8>` | an integer |
/// | `<string>`, or text with no type | a string |
/// | `<boolean>` (`1`, `0`) | a boolean |
/// | `<double>` | a number (read by its integer part where an integer is asked for) |
/// | `<base64>` | the base64 text, as JSON-RPC carries a document (`addMetalink`) |
/// | `<dateTime.iso8601>` | its text |
/// | `<array><data>`, `<struct><member>` | an array, an object |
/// | `<nil/>` | null |
///
/// The document is untrusted. Before the parser runs it must be ASCII-compatible (UTF-8, US-ASCII or ISO-8859-1: no
/// UTF-16, UTF-7 or EBCDIC, whose bytes would hide markup from a look at them) and hold no markup declaration
/// (`<!DOCTYPE`, `<!ENTITY`: XML-RPC has no DTD, and a DTD is where entity expansion lives); the parser's
/// declaration callbacks refuse one too, external entities are off, an element with attributes or one XML-RPC
/// does not have is refused, and values nest at most ``maximumDepth`` deep. The caller bounds the size
/// (`rpc-max-request-size`).
struct XMLRPCRequest: Sendable, Hashable {
    var methodName: String
    var params: [JSONValue]

    /// The deepest nesting of arrays and structs taken.
    static let maximumDepth = 64

    init(methodName: String, params: [JSONValue]) {
        self.methodName = methodName
        self.params = params
    }

    /// Reads a request body.
    /// - Throws: ``RPCError`` with code 1 and what is wrong with the document.
    init(parsing body: some Collection<UInt8>) throws(RPCError) {
        let bytes = Array(body)
        if let encoding = Self.unsafeEncoding(bytes) {
            throw .method("XML-RPC request is in \(encoding); send it as UTF-8.")
        }
        if let declaration = Self.declarationOutsideComments(bytes) {
            throw .method("XML-RPC request has a \(declaration); DTDs and entities are not accepted.")
        }
        let reader = XMLRPCReader()
        let parser = XMLParser(data: Data(bytes))
        parser.shouldResolveExternalEntities = false
        parser.shouldProcessNamespaces = false
        parser.delegate = reader
        let parsed = parser.parse()
        if let problem = reader.problem { throw .method("Failed to parse xml-rpc request: \(problem)") }
        guard parsed, let call = reader.call else {
            let reason = parser.parserError.map { "\($0.localizedDescription)" } ?? "malformed XML"
            throw .method("Failed to parse xml-rpc request: line \(parser.lineNumber): \(reason).")
        }
        self = call
    }

    /// Why the document's bytes are not ASCII-compatible, or `nil`: a NUL byte (UTF-16 or UTF-32), a first
    /// character other than `<` after an optional UTF-8 byte-order mark and blanks (EBCDIC, a UTF-16 mark), or an
    /// `encoding` declared other than UTF-8, US-ASCII or ISO-8859-1.
    static func unsafeEncoding(_ bytes: [UInt8]) -> String? {
        if bytes.contains(0) { return "a wide encoding (it has NUL bytes)" }
        var start = bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
        while start < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[start]) { start += 1 }
        guard start == bytes.count || bytes[start] == UInt8(ascii: "<") else {
            return "an encoding that is not ASCII-compatible"
        }
        guard bytes[start...].starts(with: Array("<?xml".utf8)) else { return nil }
        let declaration = bytes[start...].prefix { $0 != UInt8(ascii: ">") }
        let text = String(decoding: declaration, as: UTF8.self).lowercased()
        guard let range = text.range(of: "encoding") else { return nil }
        let value = text[range.upperBound...].drop { $0 == " " || $0 == "=" || $0 == "\"" || $0 == "'" }
            .prefix { $0.isLetter || $0.isNumber || $0 == "-" || $0 == "_" || $0 == "." }
        let allowed: Set<Substring> = ["utf-8", "utf8", "us-ascii", "ascii", "iso-8859-1", "latin1", "iso_8859-1"]
        return allowed.contains(value) ? nil : "the encoding '\(value)'"
    }

    /// `<!DOCTYPE`, `<!ENTITY` or any other markup declaration (`<!` that does not open a comment or a CDATA
    /// section), named, or `nil`. Comments, CDATA sections and processing instructions are skipped whole, so
    /// markup that only looks like one of them inside another is not taken for it.
    static func declarationOutsideComments(_ bytes: [UInt8]) -> String? {
        let bang = Array("<!".utf8)
        let comment = Array("<!--".utf8)
        let commentEnd = Array("-->".utf8)
        let cdata = Array("<![CDATA[".utf8)
        let cdataEnd = Array("]]>".utf8)
        let instruction = Array("<?".utf8)
        let instructionEnd = Array("?>".utf8)
        func matches(_ pattern: [UInt8], at index: Int) -> Bool {
            index + pattern.count <= bytes.count && bytes[index..<index + pattern.count].elementsEqual(pattern)
        }
        func skip(past end: [UInt8], from index: Int) -> Int {
            var index = index
            while index < bytes.count, !matches(end, at: index) { index += 1 }
            return index + end.count
        }
        var index = 0
        while index < bytes.count {
            if bytes[index] != UInt8(ascii: "<") {
                index += 1
            } else if matches(comment, at: index) {
                index = skip(past: commentEnd, from: index + comment.count)
            } else if matches(cdata, at: index) {
                index = skip(past: cdataEnd, from: index + cdata.count)
            } else if matches(instruction, at: index) {
                index = skip(past: instructionEnd, from: index + instruction.count)
            } else if matches(bang, at: index) {
                let word = bytes[(index + 2)...].prefix { $0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z") }
                return word.isEmpty ? "markup declaration" : "<!\(String(decoding: word, as: UTF8.self))"
            } else {
                index += 1
            }
        }
        return nil
    }
}

/// The `XMLParser` delegate behind ``XMLRPCRequest/init(parsing:)``: a stack of the elements open, each collecting
/// its text or its values.
final class XMLRPCReader: NSObject, XMLParserDelegate {
    private enum Frame {
        case methodCall
        case methodName(String)
        case params
        case param(JSONValue?)
        /// `<value>`: its text (a string when no type element comes) and its typed value, once read.
        case value(text: String, typed: JSONValue?)
        /// A scalar type element and its text.
        case scalar(name: String, text: String)
        case nilValue
        case structure([JSONObject.Member])
        case member(name: String?, value: JSONValue?)
        case name(String)
        /// `<array>`, with the values of its `<data>` once that has ended.
        case array([JSONValue])
        case data([JSONValue])
    }

    private var stack: [Frame] = []
    private var methodName: String?
    private var params: [JSONValue]?
    private var containers = 0
    /// `</methodCall>` was read: the document is whole.
    private var ended = false
    private(set) var problem: String?

    /// The call, once the document has ended well.
    var call: XMLRPCRequest? {
        guard self.problem == nil, self.ended, let methodName = self.methodName else { return nil }
        return XMLRPCRequest(methodName: methodName, params: self.params ?? [])
    }

    private static let scalars: Set<String> = [
        "int", "i4", "i8", "string", "boolean", "double", "base64", "dateTime.iso8601",
    ]

    private func fail(_ parser: XMLParser, _ problem: String) {
        guard self.problem == nil else { return }
        self.problem = problem
        parser.abortParsing()
    }

    func parser(
        _ parser: XMLParser,
        didStartElement element: String,
        namespaceURI: String?,
        qualifiedName: String?,
        attributes: [String: String] = [:]
    ) {
        guard self.problem == nil else { return }
        guard attributes.isEmpty else { return self.fail(parser, "<\(element)> has attributes") }
        let frame: Frame
        switch (self.stack.last, element) {
        case (nil, "methodCall"): frame = .methodCall
        case (.methodCall?, "methodName"): frame = .methodName("")
        case (.methodCall?, "params"): frame = .params
        case (.params?, "param"): frame = .param(nil)
        case (.param(nil)?, "value"), (.member(_, nil)?, "value"), (.data?, "value"):
            frame = .value(text: "", typed: nil)
        case (.value(_, nil)?, let type) where Self.scalars.contains(type):
            frame = .scalar(name: type, text: "")
        case (.value(_, nil)?, "nil"): frame = .nilValue
        case (.value(_, nil)?, "struct"), (.value(_, nil)?, "array"):
            self.containers += 1
            guard self.containers <= XMLRPCRequest.maximumDepth else {
                return self.fail(parser, "values nest deeper than \(XMLRPCRequest.maximumDepth) levels")
            }
            frame = element == "struct" ? .structure([]) : .array([])
        case (.structure?, "member"): frame = .member(name: nil, value: nil)
        case (.member(nil, nil)?, "name"): frame = .name("")
        case (.array?, "data"): frame = .data([])
        case (let parent, _):
            let inside = parent.map { _ in " here" } ?? " as the root (expected <methodCall>)"
            return self.fail(parser, "unexpected element <\(element)>\(inside)")
        }
        self.stack.append(frame)
    }

    /// Text goes to the frame on top. The frame is taken off the stack while its text grows, so the text is
    /// appended in place, not copied: libxml2 hands long text over in pieces of a few hundred bytes.
    func parser(_ parser: XMLParser, foundCharacters string: String) {
        guard self.problem == nil, var top = self.stack.popLast() else { return }
        switch top {
        case .methodName(var text):
            top = .methodName("")
            text += string
            top = .methodName(text)
        case .value(var text, let typed):
            top = .value(text: "", typed: nil)
            text += string
            top = .value(text: text, typed: typed)
        case .scalar(let name, var text):
            top = .nilValue
            text += string
            top = .scalar(name: name, text: text)
        case .name(var text):
            top = .name("")
            text += string
            top = .name(text)
        default:
            break  // whitespace between elements
        }
        self.stack.append(top)
    }

    func parser(_ parser: XMLParser, foundCDATA block: Data) {
        self.parser(parser, foundCharacters: String(decoding: block, as: UTF8.self))
    }

    func parser(_ parser: XMLParser, didEndElement element: String, namespaceURI: String?, qualifiedName: String?) {
        guard self.problem == nil, let frame = self.stack.popLast() else { return }
        switch frame {
        case .methodCall:
            if self.methodName == nil { self.fail(parser, "<methodCall> has no <methodName>") }
            self.ended = true
        case .methodName(let name):
            self.methodName = name.trimmingCharacters(in: .whitespacesAndNewlines)
        case .params:
            if self.params == nil { self.params = [] }
        case .param(let value):
            guard let value else { return self.fail(parser, "<param> has no <value>") }
            self.params = self.params ?? []
            self.params?.append(value)
        case .value(let text, let typed):
            self.attach(typed ?? .string(text), parser: parser)
        case .scalar(let name, let text):
            guard let value = Self.scalar(name, text) else {
                return self.fail(parser, "<\(name)> holds '\(text.prefix(40))', not a value of that type")
            }
            self.setTyped(value)
        case .nilValue:
            self.setTyped(.null)
        case .structure(let members):
            self.containers -= 1
            self.setTyped(.object(JSONObject(members)))
        case .member(let name, let value):
            guard let name, let value else { return self.fail(parser, "<member> needs a <name> and a <value>") }
            guard case .structure(var members)? = self.stack.popLast() else { return }
            members.append(JSONObject.Member(key: name, value: value))
            self.stack.append(.structure(members))
        case .name(let name):
            guard case .member(nil, nil)? = self.stack.last else { return }
            self.stack[self.stack.count - 1] = .member(name: name, value: nil)
        case .array(let values):
            self.containers -= 1
            self.setTyped(.array(values))
        case .data(let values):
            guard case .array? = self.stack.last else { return }
            self.stack[self.stack.count - 1] = .array(values)
        }
    }

    /// A typed value for the `<value>` on top of the stack.
    private func setTyped(_ value: JSONValue) {
        guard case .value(let text, nil)? = self.stack.last else { return }
        self.stack[self.stack.count - 1] = .value(text: text, typed: value)
    }

    /// A finished `<value>` for its parent: a parameter, a member or an element of an array.
    private func attach(_ value: JSONValue, parser: XMLParser) {
        switch self.stack.last {
        case .param(nil)?: self.stack[self.stack.count - 1] = .param(value)
        case .member(let name, nil)?: self.stack[self.stack.count - 1] = .member(name: name, value: value)
        case .data?:
            guard case .data(var values)? = self.stack.popLast() else { return }
            values.append(value)
            self.stack.append(.data(values))
        default: self.fail(parser, "a <value> out of place")
        }
    }

    static func scalar(_ name: String, _ text: String) -> JSONValue? {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        switch name {
        case "int", "i4", "i8":
            return Int64(trimmed.hasPrefix("+") ? String(trimmed.dropFirst()) : trimmed).map(JSONValue.integer)
        case "boolean":
            switch trimmed {
            case "1", "true": return .bool(true)
            case "0", "false": return .bool(false)
            default: return nil
            }
        case "double":
            return Double(trimmed).map(JSONValue.double)
        case "base64":
            return .string(String(trimmed.filter { !$0.isWhitespace }))
        case "dateTime.iso8601":
            return .string(trimmed)
        default:
            return .string(text)
        }
    }

    // A DTD has no place in XML-RPC: the scan before the parser refuses one, and these refuse it again.
    func parser(_ parser: XMLParser, foundInternalEntityDeclarationWithName name: String, value: String?) {
        self.fail(parser, "an entity is declared")
    }

    func parser(
        _ parser: XMLParser,
        foundExternalEntityDeclarationWithName name: String,
        publicID: String?,
        systemID: String?
    ) {
        self.fail(parser, "an entity is declared")
    }

    func parser(_ parser: XMLParser, foundElementDeclarationWithName elementName: String, model: String) {
        self.fail(parser, "an element is declared")
    }

    func parser(_ parser: XMLParser, resolveExternalEntityName name: String, systemID: String?) -> Data? {
        self.fail(parser, "an external entity is referred to")
        return nil
    }

    func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
        // `problem` stays for the delegate's own refusals; the parser's error is read by the caller.
    }
}
