#if canImport(Glibc)
    import Glibc
#endif

/// The URL with its authority in ASCII capitals (scheme, path and query as
/// they are), or nil without a scheme.
func asciiUppercasedHost(_ url: String) -> String? {
    guard let schemeEnd = url.range(of: "://") else { return nil }
    let rest = url[schemeEnd.upperBound...]
    let end = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
    return String(url[..<schemeEnd.upperBound]) + rest[..<end].uppercased() + rest[end...]
}

/// FUZZ_STRICT=1: check known findings too (see fuzz/crashes/).
let strict = getenv("FUZZ_STRICT") != nil
