import Foundation
import Larder
import LarderHTTP

/// The write paths' entries to the ``QuotaLedger``: every upload body, every write the server
/// makes on the caller's behalf, every resumable upload created goes through one of these.
///
/// What is charged, in bytes: the body of every upload request (simple, multipart, every chunk
/// of a resumable upload, tus or Firebase or GCS); the whole size of a GCS `compose` and of a tus
/// final concatenation, before a byte is copied (each writes new content, up to the maximum upload
/// size, from a request of a few hundred bytes); the size of an image variant rendered for a
/// download. A copy or rewrite charges nothing: the store is content-addressed, so it adds a row
/// and no bytes.
extension ServiceContext {
  /// Who `request` is charged to (nil: an admin identity, exempt).
  func quotaSubject(_ identity: Identity?, _ request: HTTPRequest) -> QuotaSubject? {
    QuotaSubject.of(identity, address: request.remoteAddress)
  }

  /// `sink` with the request's body charged to the caller as it streams (``QuotaChargedSink``).
  /// - Throws: ``QuotaError`` when the declared `Content-Length` does not fit (`sink` is cancelled).
  func charged(_ sink: any HTTPBodySink, _ request: HTTPRequest, identity: Identity?) throws
    -> any HTTPBodySink
  {
    try QuotaChargedSink(
      sink, ledger: quotas, subject: quotaSubject(identity, request), declared: request.contentLength)
  }

  /// Charges `bytes` the server is about to write for the caller (a compose, a concatenation).
  /// - Throws: ``QuotaError`` when they do not fit; nothing is charged then.
  func chargeWrite(_ bytes: Int64, _ request: HTTPRequest, identity: Identity?) throws {
    let subject = quotaSubject(identity, request)
    try quotas.reserve(subject, bytes: bytes)
    if subject != nil { quotas.admitted(bytes) }
  }

  /// Creates a resumable upload with `create`, within the caller's limit on uploads in progress.
  /// - Throws: ``QuotaError/uploadsInProgress(limit:retryAfter:)`` before `create` runs.
  func creatingUpload(_ request: HTTPRequest, identity: Identity?, _ create: () throws -> Upload) throws
    -> Upload
  {
    try quotas.opening(quotaSubject(identity, request), create)
  }

  /// Finds or renders the variant `params` of `source` for a download: a render is charged its
  /// bytes (after the fact, since only the render knows them), and refused while the caller's
  /// bucket is empty; a variant already made is served whatever the bucket holds.
  /// - Throws: ``QuotaError`` before rendering; what `render` throws.
  func chargingRender(_ request: HTTPRequest, source: File, params: String, _ render: () throws -> File)
    throws
    -> File
  {
    // Asked here rather than answered here: `render` finds it again, as it does for every caller.
    guard try larder.derived.find(source: source.sha256, params: params) == nil else { return try render() }
    // The download's route authenticated the request already; a failure here cannot happen.
    let identity = (try? authenticator.authenticate(request.headers)) ?? nil
    let subject = quotaSubject(identity, request)
    try quotas.requireCredit(subject)
    let started = Date(timeIntervalSince1970: (Date().timeIntervalSince1970 * 1000).rounded(.down) / 1000)
    let file = try render()
    // Made during this call: rendered for it (a cached variant is older).
    if file.createdAt >= started { quotas.charge(subject, bytes: file.size) }
    return file
  }
}
