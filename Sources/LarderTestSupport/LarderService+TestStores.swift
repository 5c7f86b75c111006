import Larder
import LarderPostgres
import LarderS3Store
import LarderServer
import LarderWebhooks

extension LarderService.Options {
  /// These options on this test run's catalog and blobs (``TestStore``) where they name none,
  /// with every backend and the executable's webhook transport, as `larder serve` composes them.
  public func onTestStores() -> Self {
    var options = self
    TestStore.fill(&options.catalog, &options.blobs, for: dataDirectory)
    options.backends = [options.backends, .postgres, .s3]
    if options.events.transport == nil { options.events.transport = CurlWebhookTransport() }
    return options
  }
}
