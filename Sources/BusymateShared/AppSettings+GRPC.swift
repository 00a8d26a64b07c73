extension AppSettings.Reader {
    /// `grpc.descriptor_sets`: a list of paths. Only their form is checked
    /// here: the files are read by `show` and the web page, which say when
    /// one is missing or no descriptor set (the proxy never reads them).
    mutating func readGRPC(_ root: JSONNode, into s: inout AppSettings) throws(SettingsError) {
        guard let grpc = root["grpc"] else { return }
        try object(grpc, path: "grpc")
        guard let node = grpc["descriptor_sets"] else { return }
        s.grpcDescriptorSets = []
        for (i, item) in try strings(node, path: "grpc.descriptor_sets").enumerated() {
            let path = item.text
            guard !path.trimmingCharacters(in: .whitespaces).isEmpty, !path.contains("\u{0}") else {
                throw SettingsError(
                    message: "\"\(path)\" is not a path to a descriptor set (protoc --include_imports -o api.pb api.proto writes one)",
                    position: item.position, keyPath: "grpc.descriptor_sets[\(i)]")
            }
            s.grpcDescriptorSets.append(path)
        }
    }
}
