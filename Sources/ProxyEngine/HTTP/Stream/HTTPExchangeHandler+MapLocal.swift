import BusymateShared
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix

/// map_local: the file is found on NIO's blocking pool (real paths, for
/// the root check), read through NIOFileSystem, then answered here; nothing
/// goes upstream. The rest of the request is read
/// and dropped; the next one waits (the pipeline handler holds it) until
/// this answer has ended.
extension HTTPExchangeHandler {
    func serveLocal(_ rule: Rule, client: any ExchangeClient) {
        guard case let .mapLocal(file, directory) = rule.action, let exchange = current else { return }
        let path = exchange.request.originForm
        let bound = NIOLoopBound(self, eventLoop: client.eventLoop)
        let found = client.eventLoop.makePromise(of: Result<(String, ByteBuffer), MapLocal.Refusal>.self)
        found.completeWithTask {
            let real = try await NIOThreadPool.singleton.runIfActive {
                MapLocal.file(for: rule, file: file, directory: directory, path: path)
            }
            switch real {
            case let .success(real): return await MapLocal.read(real).map { (real, $0) }
            case let .failure(refusal): return .failure(refusal)
            }
        }
        found.futureResult.whenComplete { result in
            let handler = bound.value
            // The client left meanwhile (its close ended the row and the exchange), or is leaving.
            guard let client = handler.client, handler.machine.rowOpen else { return }
            let allocator = client.allocator
            switch result {
            case let .success(.success((real, body))):
                var headers = HTTPHeaders([
                    ("Content-Type", MapLocal.contentType(real)), ("Content-Length", "\(body.readableBytes)"), ("Via", "1.1 busymate"),
                ])
                handler.hooks.responseEdits(for: HTTPResponseHead(version: .http1_1, status: .ok, headers: headers))?.apply(to: &headers)
                let local = LocalResponse(head: HTTPResponseHead(version: .http1_1, status: .ok, headers: headers), body: body)
                handler.respond(local, error: nil, client: client)
            case let .success(.failure(refusal)):
                let why = "map_local rule \"\(rule.name)\": \(refusal)"
                handler.respond(
                    LocalResponse.text(HTTPResponseStatus(statusCode: refusal.status), why, allocator: allocator), error: why,
                    client: client)
            case let .failure(error):
                let why = "map_local rule \"\(rule.name)\": \(error)"
                handler.respond(LocalResponse.text(.internalServerError, why, allocator: allocator), error: why, client: client)
            }
        }
    }
}
