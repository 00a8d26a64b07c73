import BusymateShared
import Logging
import NIOCore
import NIOSSL
import PostgresNIO

/// A connection to a team's PostgreSQL as its URL says (`sslmode`).
enum TeamDatabaseConnection {
    static func connect(_ address: TeamDatabase.Address, on eventLoop: any EventLoop, id: Int, logger: Logger) async throws
        -> PostgresConnection
    {
        let tls: PostgresConnection.Configuration.TLS
        switch address.tls {
        case .disable: tls = .disable
        case .require:
            var configuration = TLSConfiguration.makeClientConfiguration()
            configuration.certificateVerification = .none
            tls = .require(try NIOSSLContext(configuration: configuration))
        case .verifyFull: tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
        }
        var configuration = PostgresConnection.Configuration(
            host: address.host, port: address.port, username: address.user,
            password: address.password, database: address.database, tls: tls)
        configuration.options.connectTimeout = .seconds(10)
        return try await PostgresConnection.connect(on: eventLoop, configuration: configuration, id: id, logger: logger)
    }
}
