import LarderLogging

extension Logger {
  /// Runs `body`, logging instead of throwing its failure: for cleanup whose failure leaves
  /// something that something else reclaims later (gc, a lease running out, the next open), and
  /// that must not fail the request or the work it follows.
  ///
  ///     larder.logger.bestEffort("give back the lease of \(id)") { try release() }
  func bestEffort(_ what: @autoclosure () -> String, _ body: () throws -> Void) {
    do {
      try body()
    } catch {
      warning("could not \(what()) (left for later): \(error)")
    }
  }
}
