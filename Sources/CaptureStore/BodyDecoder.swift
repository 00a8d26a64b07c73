import CBrotli
import CompressNIO
import Foundation
import NIOCore

/// Content-Encoding decoding for readers: bodies are stored as received.
public enum BodyDecoder {
    /// The encodings `decode` handles.
    public static let supported: Set<String> = ["gzip", "x-gzip", "deflate", "br", "identity"]

    /// What a decoded body may grow to: a kilobyte of gzip can stand for
    /// gigabytes (a decompression bomb), and readers hold the result whole.
    public static let maxDecodedSize = 64 << 20

    /// `data` decoded per `encoding` (a Content-Encoding value, possibly a
    /// list such as "gzip, br", applied in order); nil when it cannot be,
    /// or when it would be larger than `limit`.
    public static func decode(_ data: Data, encoding: String, limit: Int = maxDecodedSize) -> Data? {
        let codings = encoding.lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        var current = data
        // Codings are listed in the order applied: undo them last first.
        for coding in codings.reversed() {
            guard let next = decodeOne(current, coding: coding, limit: limit) else { return nil }
            current = next
        }
        return current
    }

    private static func decodeOne(_ data: Data, coding: String, limit: Int) -> Data? {
        switch coding {
        case "identity": return data
        case "gzip", "x-gzip": return inflate(data, [.gzip()], limit: limit)
        // HTTP's "deflate" is zlib-wrapped, but some servers send it raw.
        case "deflate": return inflate(data, [.zlib(), .deflate()], limit: limit)
        case "br": return brotli(data, limit: limit)
        default: return nil
        }
    }

    private static func inflate(_ data: Data, _ algorithms: [CompressionAlgorithm], limit: Int) -> Data? {
        for algorithm in algorithms {
            var buffer = ByteBuffer(bytes: data)
            // CompressNIO's buffers round up, so its bound is loose (under twice
            // `limit`): the exact one is checked here.
            if let decoded = try? buffer.decompress(with: algorithm, maxSize: limit) {
                return decoded.readableBytes <= limit ? Data(decoded.readableBytesView) : nil
            }
        }
        return nil
    }

    private static func brotli(_ data: Data, limit: Int) -> Data? {
        guard let state = BrotliDecoderCreateInstance(nil, nil, nil) else { return nil }
        defer { BrotliDecoderDestroyInstance(state) }
        var output = Data()
        let chunk = 64 * 1024
        var scratch = [UInt8](repeating: 0, count: chunk)
        return data.withUnsafeBytes { raw -> Data? in
            var availableIn = raw.count
            var nextIn = raw.bindMemory(to: UInt8.self).baseAddress
            while true {
                var availableOut = chunk
                let result = scratch.withUnsafeMutableBufferPointer { out -> BrotliDecoderResult in
                    var nextOut = out.baseAddress
                    return BrotliDecoderDecompressStream(state, &availableIn, &nextIn, &availableOut, &nextOut, nil)
                }
                output.append(contentsOf: scratch[0..<(chunk - availableOut)])
                if output.count > limit { return nil }
                switch result {
                case BROTLI_DECODER_RESULT_SUCCESS: return output
                case BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT: continue
                default: return nil  // an error, or input that ends early
                }
            }
        }
    }
}
