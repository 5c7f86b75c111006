import LarderServer
import LarderTestSupport

extension LarderService.Options {
  /// These options on this test run's catalog and blobs (``TestStore``) where they name none.
  func onTestStores() -> Self {
    var options = self
    options.catalog = catalog ?? TestStore.catalog(for: dataDirectory)
    options.blobs = blobs ?? TestStore.blobs(for: dataDirectory)
    return options
  }
}
