import Foundation
import LarderLogging

extension HTTPServer {
  /// How the server binds and what it tolerates from clients.
  public struct Configuration: Sendable {
    /// A numeric IPv4 or IPv6 address (or `localhost`); the listen socket is bound to it alone.
    public var host: String = "127.0.0.1"
    /// 0 binds any free port; read it back from `HTTPServer.boundPort`.
    public var port: Int = 0
    /// Event loops, one per thread, with four times as many workers (at least 8) for the
    /// handlers that may wait; see docs/ARCHITECTURE.md, "The HTTP layer".
    public var threadPoolSize: Int = ProcessInfo.processInfo.activeProcessorCount
    /// Concurrent connections accepted in total; lowered at start to what the open-file limit
    /// allows (about half of `RLIMIT_NOFILE`: a socket and an upload's file each).
    public var connectionLimit: Int = 1024
    /// Concurrent connections from one IP address, so one address cannot fill
    /// `connectionLimit` alone; 0 = unlimited.
    public var perIPConnectionLimit: Int = 64
    /// Seconds a connection may stay idle (no bytes either way) before it is closed,
    /// so slow or stalled clients cannot pin connections forever; 0 = never.
    public var connectionTimeout: Int = 60
    /// Seconds a connection may take to deliver a complete request head, counted from accept
    /// or from the end of the previous request, whatever trickles in meanwhile (a client
    /// sending a header byte now and then never reaches `connectionTimeout`). It also bounds
    /// how long an idle keep-alive connection is kept. 0 = no deadline.
    public var requestHeadTimeout: Int = 30
    /// Per-connection buffer memory. Bounds the upload chunk size handed to a sink (about
    /// half of it), and the largest request header block. See ARCHITECTURE.md, "The HTTP layer":
    /// bigger speeds large uploads but costs every small request.
    public var connectionMemoryLimit: Int = 64 * 1024
    /// Request header block limit (request line excluded); larger gets 431.
    public var maxHeaderBytes: Int = 16 * 1024
    /// Request bodies larger than this are refused with 413 (before reading, when
    /// `Content-Length` says so; mid-stream for chunked bodies). `nil` = unlimited.
    public var maxBodyBytes: Int64? = nil
    public var listenBacklog: Int = 511
    public var accessLog: AccessLog.Destination = .standardError
    /// Where the server's warnings go.
    public var logger = Logger(label: "larder.http")

    public init() {}

    public init(host: String = "127.0.0.1", port: Int = 0) {
      self.host = host
      self.port = port
    }
  }
}
