import Foundation
import LarderLogging

extension HTTPServer {
  /// How the server binds and what it tolerates from clients.
  public struct Configuration: Sendable {
    /// A numeric IPv4 or IPv6 address (or `localhost`); the listen socket is bound to it alone.
    public var host: String = "127.0.0.1"
    /// 0 binds any free port; read it back from `HTTPServer.boundPort`.
    public var port: Int = 0
    /// libmicrohttpd worker threads, each polling (`poll(2)`) its own connections.
    public var threadPoolSize: Int = ProcessInfo.processInfo.activeProcessorCount
    /// Concurrent connections accepted in total.
    public var connectionLimit: Int = 1024
    /// Concurrent connections from one IP address; 0 = unlimited.
    public var perIPConnectionLimit: Int = 0
    /// Seconds a connection may stay idle (no bytes either way) before it is closed,
    /// so slow or stalled clients cannot pin connections forever; 0 = never.
    public var connectionTimeout: Int = 60
    /// Per-connection buffer memory. Bounds the upload chunk size handed to a sink (about
    /// half of it), and the largest request header block. See ARCHITECTURE §1: bigger
    /// speeds large uploads but costs every small request.
    public var connectionMemoryLimit: Int = 64 * 1024
    /// Request header block limit (request line excluded); larger gets 431.
    public var maxHeaderBytes: Int = 16 * 1024
    /// Request bodies larger than this are refused with 413 (before reading, when
    /// `Content-Length` says so; mid-stream for chunked bodies). `nil` = unlimited.
    public var maxBodyBytes: Int64? = nil
    public var listenBacklog: Int = 511
    public var accessLog: AccessLog.Destination = .standardError
    /// Where libmicrohttpd's own error messages and the server's warnings go.
    public var logger = Logger(label: "larder.http")

    public init() {}

    public init(host: String = "127.0.0.1", port: Int = 0) {
      self.host = host
      self.port = port
    }
  }
}
