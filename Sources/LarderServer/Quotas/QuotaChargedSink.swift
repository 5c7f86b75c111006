import Foundation
import LarderHTTP

/// A request body charged to its ``QuotaSubject`` as it streams, in front of the sink that
/// writes it: a declared `Content-Length` is reserved up front (so a body that cannot fit is
/// refused before a byte is read), bytes beyond what was reserved (a chunked body) are charged
/// chunk by chunk before they are passed on, and what was reserved and never came is refunded.
final class QuotaChargedSink: HTTPBodySink {
  private let inner: any HTTPBodySink
  private let ledger: QuotaLedger
  private let subject: QuotaSubject?
  private var reserved: Int64

  /// - Throws: ``QuotaError`` when `declared` does not fit; `inner` is cancelled then.
  init(_ inner: any HTTPBodySink, ledger: QuotaLedger, subject: QuotaSubject?, declared: Int64?) throws {
    self.inner = inner
    self.ledger = ledger
    self.subject = subject
    reserved = subject == nil ? 0 : max(0, declared ?? 0)
    do {
      try ledger.reserve(subject, bytes: reserved)
    } catch {
      inner.cancel()
      throw error
    }
  }

  func receive(_ chunk: UnsafeRawBufferPointer) throws {
    if subject != nil {
      let count = Int64(chunk.count)
      let covered = min(reserved, count)
      reserved -= covered
      if count > covered { try ledger.reserve(subject, bytes: count - covered) }
      ledger.admitted(count)
    }
    try inner.receive(chunk)
  }

  func finish() throws -> HTTPResponse {
    settle()
    return try inner.finish()
  }

  func cancel() {
    settle()
    inner.cancel()
  }

  func decorate(_ response: inout HTTPResponse) {
    inner.decorate(&response)
  }

  private func settle() {
    ledger.refund(subject, bytes: reserved)
    reserved = 0
  }
}
