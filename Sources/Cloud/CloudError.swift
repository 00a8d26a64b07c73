import AsyncHTTPClient
import Foundation
import NIOCore

/// Network failures in a user's words.
public enum CloudError {
    public static func describe(_ error: Error) -> String {
        if let error = error as? HTTPClientError {
            switch error {
            case .deadlineExceeded, .readTimeout: return "no answer in time"
            case .connectTimeout: return "no connection in time"
            case .remoteConnectionClosed: return "the server closed the connection"
            default: return "\(error)"
            }
        }
        if let error = error as? IOError { return error.description }
        return "\(error)"
    }
}
