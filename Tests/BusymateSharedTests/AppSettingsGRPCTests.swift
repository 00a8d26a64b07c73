import Foundation
import Testing

@testable import BusymateShared

/// `grpc.descriptor_sets`: the FileDescriptorSet files `show` and the web
/// page name gRPC fields from.
@Suite struct AppSettingsGRPCTests {
    @Test func descriptorSetsAreAListOfPaths() throws {
        let (s, unknown) = try AppSettings.decode(#"{"grpc": {"descriptor_sets": ["api.pb", "/opt/protos/all.pb"]}}"#)
        #expect(s.grpcDescriptorSets == ["api.pb", "/opt/protos/all.pb"])
        #expect(unknown.isEmpty)
        #expect(AppSettings().grpcDescriptorSets.isEmpty)
        #expect(try AppSettings.decode(#"{"grpc": {"other": 1}}"#).unknownKeys == ["grpc.other"])
    }

    @Test func aWrongTypeIsAClearErrorAtTheValue() {
        let one = AppSettings.decodeError(#"{"grpc": {"descriptor_sets": "api.pb"}}"#)
        #expect(
            one?.description == "1:30: grpc.descriptor_sets: expected an array of strings, found a string", "\(String(describing: one))")
        let number = AppSettings.decodeError(#"{"grpc": {"descriptor_sets": ["a.pb", 3]}}"#)
        #expect(number?.keyPath == "grpc.descriptor_sets[1]" && number?.message == "expected a string, found a number")
        let empty = AppSettings.decodeError(#"{"grpc": {"descriptor_sets": [" "]}}"#)
        #expect(empty?.keyPath == "grpc.descriptor_sets[0]" && empty?.message.contains("protoc --include_imports -o") == true)
        #expect(AppSettings.decodeError(#"{"grpc": []}"#)?.description == "1:10: grpc: expected an object, found an array")
    }
}
