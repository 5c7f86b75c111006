import Foundation

/// Plain HTTP requests over the one libcurl wrapper (``CurlEasy``), for callers that are not S3:
/// the server's webhook deliveries. http and https only; redirects are not followed (a 3xx is
/// an answer like any other); one instance keeps its connection open between requests and is
/// used by one thread at a time.
public final class OutboundHTTP: @unchecked Sendable {
  private let easy = CurlEasy()

  public init() {}

  /// What came back: the status and up to a few KiB of the body (for the log).
  public struct Response: Sendable {
    public var status: Int
    public var body: [UInt8]
  }

  /// A failure below HTTP (refused, unreachable, timed out), described.
  public struct Failure: Error, CustomStringConvertible {
    public var description: String
  }

  /// POSTs `body` to `url` with `headers` (`Name: value`), giving up after `timeout` in all.
  /// - Throws: ``Failure``.
  public func post(url: String, headers: [String], body: [UInt8], timeout: Duration) throws -> Response {
    let millis = Int(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000)
    let exchange = CurlExchange(
      method: "POST", url: url, headers: headers + ["Expect:"], body: .bytes(body), signature: "", accessKey: "",
      secretKey: "", connectTimeoutMilliseconds: max(1, millis), stallTimeoutSeconds: 0,
      totalTimeoutMilliseconds: max(1, millis), webProtocolsOnly: true)
    do {
      let response = try easy.perform(exchange)
      return Response(status: response.status, body: Array(response.body.prefix(4096)))
    } catch let failure as CurlFailure {
      throw Failure(description: failure.message.isEmpty ? "\(failure.kind)" : failure.message)
    }
  }
}
