// The other half of fuzz-grpc: a descriptor set as `grpc.descriptor_sets`
// names it (`ProtobufDescriptorSet.parse`, what `DescriptorSets` reads for
// `show` and the web detail, from a file anyone in the group may write)
// and a message read by name with it (`ProtobufSchemaDecoder`, what a
// gRPC call's messages go through when a set describes its method).
//
// Input (after a selector byte with its high bit set): a 2-byte
// big-endian length N, N bytes of FileDescriptorSet, then one message's
// bytes, read as every method's request and response type and as the
// message type the selector's low bits pick.
//
// Properties:
// - it never traps, whatever the set (fields of any wire type, names that
//   are no text, type names that name nothing or themselves, cycles);
// - a refused set says why; an accepted one holds what descriptor.proto
//   allows: messages under their own names, field numbers 1 to 2^29-1
//   with names, methods on `/`-paths;
// - merging a set into itself changes nothing but the file list;
// - a message read by name keeps the limits the schema-less reading keeps,
//   names only the fields its type declares (by their declared names), and
//   renders as lines and as JSON that parses back.
import BusymateShared
import Foundation
import FuzzSupport

@testable import CaptureStore

/// At most this many message types are read per input (a set may declare thousands).
let typesPerInput = 8

func fuzzDescriptorSet(_ selector: UInt8, _ input: ArraySlice<UInt8>) {
    guard input.count >= 2 else { return }
    let length = Int(input[input.startIndex]) << 8 | Int(input[input.startIndex + 1])
    let rest = input.dropFirst(2)
    let set = Data(rest.prefix(length))
    let payload = Data(rest.dropFirst(length))
    switch ProtobufDescriptorSet.parse(set) {
    case let .failure(failure):
        Fuzz.check(!failure.description.isEmpty, "a refused descriptor set says nothing")
    case let .success(schema):
        checkSchema(schema)
        var merged = schema
        merged.merge(schema)
        Fuzz.check(
            merged.messages.count == schema.messages.count && merged.enums.count == schema.enums.count
                && merged.methods.count == schema.methods.count && merged.files.count == 2 * schema.files.count,
            "merging a set into itself changed more than its files")
        var types = schema.methods.keys.sorted().prefix(typesPerInput / 2).flatMap { path in
            schema.methods[path].map { [$0.input, $0.output] } ?? []
        }
        let names = schema.messages.keys.sorted()
        if !names.isEmpty { types.append(names[Int(selector & 0x7F) % names.count]) }
        for type in Set(types) { checkNamed(payload, as: type, schema: schema) }
    }
}

func checkSchema(_ schema: ProtobufSchema) {
    for (name, message) in schema.messages {
        Fuzz.check(!name.isEmpty && message.name == name, "message \(Fuzz.show(message.name)) kept as \(Fuzz.show(name))")
        for (number, field) in message.fields {
            Fuzz.check(
                number == field.number && (1...(1 << 29) - 1).contains(number),
                "field \(field.number) of \(Fuzz.show(name)) kept as \(number)")
            Fuzz.check(!field.name.isEmpty, "field \(number) of \(Fuzz.show(name)) has no name")
        }
    }
    for (name, enumeration) in schema.enums {
        Fuzz.check(enumeration.name == name, "enum \(Fuzz.show(enumeration.name)) kept as \(Fuzz.show(name))")
    }
    for path in schema.methods.keys {
        Fuzz.check(path.hasPrefix("/") && path.dropFirst().contains("/"), "a method on the path \(Fuzz.show(path))")
    }
}

func checkNamed(_ payload: Data, as type: String, schema: ProtobufSchema) {
    let result = ProtobufSchemaDecoder.decode(payload, as: type, schema: schema)
    check(result, size: payload.count)
    guard case let .success(fields) = result, let declared = schema.messages[type] else { return }
    for field in fields {
        guard let name = field.name else { continue }
        let expected = declared.fields[field.number]?.name
        Fuzz.check(
            name == expected,
            "field \(field.number) of \(Fuzz.show(type)) named \(Fuzz.show(name)), declared \(Fuzz.show(expected ?? "nothing"))")
    }
}
