import LarderServer

extension LarderService.Options {
  /// These options on this test run's catalog and blobs (``TestStore``) where they name none.
  public func onTestStores() -> Self {
    var options = self
    TestStore.fill(&options.catalog, &options.blobs, for: dataDirectory)
    options.http.engine = TestHTTPEngine.selected
    return options
  }
}
