/// How the events deliverer sends its webhooks, handed in by the program that composes the
/// server (``EventDeliveryOptions/transport``): the `larder` executable gives libcurl's
/// (`LarderWebhooks.CurlWebhookTransport`), so a program embedding the server alone links no
/// HTTP client, and one that sends none (no transport) still serves the change feed.
///
/// ```swift
/// options.events.transport = CurlWebhookTransport()
/// ```
public protocol WebhookTransport: Sendable {
  /// A sender for one delivery thread, which keeps its connection between requests.
  func makeSender() -> any WebhookSender
}

/// Sends webhook POSTs, used by one thread at a time. Redirects are not followed (a 3xx is an
/// answer like any other); only http and https are allowed.
public protocol WebhookSender: AnyObject {
  /// POSTs `body` to `url` with `headers` (`Name: value`), giving up after `timeout` in all.
  /// - Throws: a failure below HTTP (refused, unreachable, timed out), described.
  func post(url: String, headers: [String], body: [UInt8], timeout: Duration) throws -> WebhookResponse
}

/// What a webhook answered: the status and up to a few KiB of the body (for the log).
public struct WebhookResponse: Sendable {
  public var status: Int
  public var body: [UInt8]

  public init(status: Int, body: [UInt8]) {
    self.status = status
    self.body = body
  }
}
