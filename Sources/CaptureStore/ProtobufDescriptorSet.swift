import Foundation

/// Reads a `FileDescriptorSet` (descriptor.proto; what `protoc -o` writes)
/// with the same wire reader the messages are read with: files, their
/// messages (nested ones too), fields, enums and services. Options other
/// than `map_entry` and `packed`, source info and extensions are skipped.
/// The bytes come from a file anyone in the group may name: bad ones are a
/// failure saying where, never a trap.
public enum ProtobufDescriptorSet {
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public var description: String
    }

    public static func parse(_ data: Data) -> Result<ProtobufSchema, Failure> {
        var limits = ProtobufWire.Limits()
        // Large API sets (googleapis) run to millions of fields.
        limits.maxFields = 50_000_000
        var reader = Reader(parser: ProtobufWire.Parser(bytes: [UInt8](data), limits: limits))
        do {
            return .success(try reader.set())
        } catch {
            return .failure(error)
        }
    }

    struct Reader {
        var parser: ProtobufWire.Parser
        var schema = ProtobufSchema()
        /// Fields whose type name was written relative to their scope (protoc writes full ones).
        var relative: [(message: String, number: Int, scope: String)] = []

        mutating func set() throws(Failure) -> ProtobufSchema {
            let all = 0..<parser.bytes.count
            guard !all.isEmpty else { throw Failure(description: "the file is empty") }
            for field in try fields(all, in: "the set") {
                guard field.number == 1, field.wireType == .len else {
                    throw Failure(description: "field \(field.number) at the top: a FileDescriptorSet holds only files (field 1)")
                }
                try file(field.payload)
            }
            resolveRelativeNames()
            return schema
        }

        mutating func fields(_ range: Range<Int>, in what: String) throws(Failure) -> [ProtobufWire.RawField] {
            var out: [ProtobufWire.RawField] = []
            var index = range.lowerBound
            while index < range.upperBound {
                switch parser.next(&index, in: range) {
                case let .success(field): out.append(field)
                case let .failure(error):
                    throw Failure(description: "\(what): \(error) (at byte \(range.lowerBound + error.offset) of the file)")
                }
            }
            return out
        }

        func text(_ field: ProtobufWire.RawField, _ what: String) throws(Failure) -> String {
            guard field.wireType == .len, let text = String(validating: parser.bytes[field.payload], as: UTF8.self) else {
                throw Failure(description: "\(what) (field \(field.number)) is not text")
            }
            return text
        }

        func number(_ field: ProtobufWire.RawField, _ what: String) throws(Failure) -> UInt64 {
            guard field.wireType == .varint else { throw Failure(description: "\(what) (field \(field.number)) is not a varint") }
            return field.scalar
        }

        func nested(_ field: ProtobufWire.RawField, _ what: String) throws(Failure) -> Range<Int> {
            guard field.wireType == .len else { throw Failure(description: "\(what) (field \(field.number)) is not a message") }
            return field.payload
        }

        /// `FileDescriptorProto`: name 1, package 2, message_type 4, enum_type 5, service 6.
        mutating func file(_ range: Range<Int>) throws(Failure) {
            var name = "", package = ""
            var messages: [Range<Int>] = [], enums: [Range<Int>] = [], services: [Range<Int>] = []
            for field in try fields(range, in: "file \(schema.files.count + 1)") {
                switch field.number {
                case 1: name = try text(field, "a file's name")
                case 2: package = try text(field, "a file's package")
                case 4: messages.append(try nested(field, "a message type"))
                case 5: enums.append(try nested(field, "an enum type"))
                case 6: services.append(try nested(field, "a service"))
                default: continue
                }
            }
            schema.files.append(name)
            for range in messages { try message(range, scope: package) }
            for range in enums { try enumeration(range, scope: package) }
            for range in services { try service(range, package: package) }
        }

        static func qualified(_ name: String, in scope: String) -> String { scope.isEmpty ? name : scope + "." + name }

        /// `DescriptorProto`: name 1, field 2, nested_type 3, enum_type 4, options 7 (`map_entry` 7).
        mutating func message(_ range: Range<Int>, scope: String) throws(Failure) {
            var name = ""
            var fieldRanges: [Range<Int>] = [], nestedRanges: [Range<Int>] = [], enumRanges: [Range<Int>] = []
            var mapEntry = false
            for field in try fields(range, in: "a message type in \(scope.isEmpty ? "the file" : scope)") {
                switch field.number {
                case 1: name = try text(field, "a message's name")
                case 2: fieldRanges.append(try nested(field, "a field"))
                case 3: nestedRanges.append(try nested(field, "a nested type"))
                case 4: enumRanges.append(try nested(field, "a nested enum"))
                case 7:
                    for option in try fields(try nested(field, "message options"), in: "the options of \(name)") where option.number == 7 {
                        mapEntry = try number(option, "map_entry") != 0
                    }
                default: continue
                }
            }
            guard !name.isEmpty else { throw Failure(description: "a message type in \(scope.isEmpty ? "the file" : scope) has no name") }
            let full = Self.qualified(name, in: scope)
            var message = ProtobufSchema.Message(name: full, mapEntry: mapEntry)
            for range in fieldRanges {
                let field = try self.field(range, in: full)
                if message.fields[field.number] == nil { message.fields[field.number] = field }
            }
            if schema.messages[full] == nil { schema.messages[full] = message }
            for range in nestedRanges { try self.message(range, scope: full) }
            for range in enumRanges { try enumeration(range, scope: full) }
        }

        /// `FieldDescriptorProto`: name 1, number 3, label 4, type 5, type_name 6, options 8 (`packed` 2).
        mutating func field(_ range: Range<Int>, in message: String) throws(Failure) -> ProtobufSchema.Field {
            var name = "", fieldNumber = 0, repeated = false, type: ProtobufSchema.FieldType?, typeName: String?, packed: Bool?
            for field in try fields(range, in: "a field of \(message)") {
                switch field.number {
                case 1: name = try text(field, "a field's name")
                case 3: fieldNumber = Int(truncatingIfNeeded: try number(field, "a field's number"))
                case 4: repeated = try number(field, "a field's label") == 3
                case 5:
                    let raw = try number(field, "a field's type")
                    guard let known = ProtobufSchema.FieldType(rawValue: Int(truncatingIfNeeded: raw)) else {
                        throw Failure(description: "field \(name) of \(message) has type \(raw), which descriptor.proto does not define")
                    }
                    type = known
                case 6: typeName = try text(field, "a field's type name")
                case 8:
                    for option in try fields(try nested(field, "field options"), in: "the options of \(message).\(name)")
                    where option.number == 2 {
                        packed = try number(option, "packed") != 0
                    }
                default: continue
                }
            }
            guard !name.isEmpty, (1...536_870_911).contains(fieldNumber) else {
                throw Failure(description: "a field of \(message) has no name or no valid number")
            }
            if let written = typeName {
                if written.hasPrefix(".") {
                    typeName = String(written.dropFirst())
                } else {
                    relative.append((message, fieldNumber, message))
                }
            }
            // A type name without a type is resolved below (a message or an enum).
            guard let type = type ?? (typeName != nil ? .message : nil) else {
                throw Failure(description: "field \(name) of \(message) has no type")
            }
            return ProtobufSchema.Field(name: name, number: fieldNumber, type: type, repeated: repeated, typeName: typeName, packed: packed)
        }

        /// `EnumDescriptorProto`: name 1, value 2 (`EnumValueDescriptorProto`: name 1, number 2).
        mutating func enumeration(_ range: Range<Int>, scope: String) throws(Failure) {
            var name = ""
            var values: [Int32: String] = [:]
            for field in try fields(range, in: "an enum in \(scope.isEmpty ? "the file" : scope)") {
                switch field.number {
                case 1: name = try text(field, "an enum's name")
                case 2:
                    var valueName = "", value: Int32 = 0
                    for part in try fields(try nested(field, "an enum value"), in: "a value of enum \(name)") {
                        if part.number == 1 { valueName = try text(part, "an enum value's name") }
                        if part.number == 2 { value = Int32(truncatingIfNeeded: try number(part, "an enum value's number")) }
                    }
                    // Aliases (allow_alias): the first name is shown.
                    if values[value] == nil { values[value] = valueName }
                default: continue
                }
            }
            let full = Self.qualified(name, in: scope)
            if schema.enums[full] == nil { schema.enums[full] = ProtobufSchema.Enumeration(name: full, values: values) }
        }

        /// `ServiceDescriptorProto`: name 1, method 2 (`MethodDescriptorProto`: name 1, input_type 2, output_type 3).
        mutating func service(_ range: Range<Int>, package: String) throws(Failure) {
            var name = ""
            var methods: [(String, String, String)] = []
            for field in try fields(range, in: "a service in \(package.isEmpty ? "the file" : package)") {
                switch field.number {
                case 1: name = try text(field, "a service's name")
                case 2:
                    var method = "", input = "", output = ""
                    for part in try fields(try nested(field, "a method"), in: "a method of service \(name)") {
                        switch part.number {
                        case 1: method = try text(part, "a method's name")
                        case 2: input = try text(part, "a method's input type")
                        case 3: output = try text(part, "a method's output type")
                        default: continue
                        }
                    }
                    methods.append((method, input, output))
                default: continue
                }
            }
            for (method, input, output) in methods {
                let path = "/" + Self.qualified(name, in: package) + "/" + method
                let strip = { (t: String) in t.hasPrefix(".") ? String(t.dropFirst()) : Self.qualified(t, in: package) }
                if schema.methods[path] == nil { schema.methods[path] = ProtobufSchema.Method(input: strip(input), output: strip(output)) }
            }
        }

        /// A relative type name is looked up from the innermost scope out,
        /// as protoc resolves it.
        mutating func resolveRelativeNames() {
            for (message, number, scope) in relative {
                guard var field = schema.messages[message]?.fields[number], let written = field.typeName else { continue }
                var parts = scope.split(separator: ".").map(String.init)
                while true {
                    let candidate = Self.qualified(written, in: parts.joined(separator: "."))
                    if schema.messages[candidate] != nil || schema.enums[candidate] != nil {
                        field.typeName = candidate
                        break
                    }
                    if parts.isEmpty { break }
                    parts.removeLast()
                }
                if let name = field.typeName, schema.enums[name] != nil, field.type == .message { field.type = .enumeration }
                schema.messages[message]?.fields[number] = field
            }
        }
    }
}
