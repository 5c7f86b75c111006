import LarderS3
import LarderServer

/// Webhooks over libcurl (`LarderS3`'s ``OutboundHTTP``, the one libcurl wrapper), for the
/// events deliverer of a program that composes it (the `larder` executable).
public struct CurlWebhookTransport: WebhookTransport {
  public init() {}

  public func makeSender() -> any WebhookSender { Sender() }

  final class Sender: WebhookSender {
    private let http = OutboundHTTP()

    func post(url: String, headers: [String], body: [UInt8], timeout: Duration) throws -> WebhookResponse {
      let response = try http.post(url: url, headers: headers, body: body, timeout: timeout)
      return WebhookResponse(status: response.status, body: response.body)
    }
  }
}
