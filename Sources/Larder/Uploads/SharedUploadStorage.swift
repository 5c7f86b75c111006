import Foundation
import LarderCrypto

/// Where the bytes of resumable uploads live when several nodes share one store: the S3
/// backend's bucket, under `uploads/<id>/` (ARCHITECTURE.md, "Resumable uploads across nodes").
///
/// An upload's bytes are an S3 multipart upload (parts of at least 5 MiB) followed by *pieces*:
/// small objects holding what arrived since the last part, one per commit, so that no commit
/// re-sends bytes already stored. A node that takes the upload over reads only the pieces (under
/// 5 MiB, plus the commit in flight) and restores the SHA-256 state from the catalog row: it
/// never re-reads the upload. Every call is idempotent or writes a key no one reads until the
/// catalog says so, so a failure in the middle leaves garbage, never a wrong answer.
package protocol SharedUploadStorage: Sendable {
  /// S3's minimum part size: a part below it may only be the last.
  var minimumPartSize: Int64 { get }
  /// Starts the multipart upload that will hold upload `id`'s parts, to be assembled as `data`.
  func startParts(upload id: String, data: String) throws -> String
  /// Sends `length` bytes of `file` from `offset` as part `number`, with the MD5 of the bytes
  /// as read for sending (``SharedUploadState/Part/md5``).
  func sendPart(
    upload id: String, data: String, multipart: String, number: Int, file: String, offset: Int64, length: Int64
  ) throws -> SharedUploadState.Part
  /// Makes part `number` of the multipart upload assembled as `data` from `range` of the
  /// upload's assembled object `source` (reopening an upload whose publish failed).
  func copyPart(
    upload id: String, data: String, multipart: String, number: Int, from source: String, range: Range<Int64>
  ) throws -> SharedUploadState.Part
  /// Stores `length` bytes of `file` from `offset` as the piece `name`.
  func putPiece(upload id: String, name: String, file: String, offset: Int64, length: Int64) throws
  /// Removes a piece (absent is fine).
  func removePiece(upload id: String, name: String) throws
  /// Streams a piece.
  func readPiece(upload id: String, name: String, _ body: (UnsafeRawBufferPointer) throws -> Void) throws
  /// Assembles the parts into the upload's data object `data` (`uploads/<id>/<data>`).
  /// - Returns: the ETag the store gives the assembled object (S3: the MD5 of the parts' MD5s
  ///   and their count, ``SharedUploadState/assemblyMatches(etag:)``).
  /// - Throws: ``UploadError/assemblyMismatch(id:)`` when the store holds other parts than those
  ///   listed (S3's `InvalidPart`), the store's errors.
  func assemble(upload id: String, data: String, multipart: String, parts: [SharedUploadState.Part]) throws
    -> String
  /// The assembled data object's size, nil when there is none (the assembly never happened).
  func assembledSize(upload id: String, data: String) throws -> Int64?
  /// Streams `range` of the assembled data object (all of it when nil).
  func readData(upload id: String, data: String, range: Range<Int64>?, _ body: (UnsafeRawBufferPointer) throws -> Void) throws
  /// Removes everything stored for the upload: its multipart upload (when given), its pieces and data.
  func removeUpload(_ id: String, data: String, multipart: String?) throws
  /// The ids of uploads with something stored, and the newest date among their keys (gc's
  /// leftover pass: keys of uploads whose rows are gone).
  func forEachStoredUpload(_ body: (_ id: String, _ newest: Date) throws -> Void) throws
}

extension SharedUploadStorage {
  /// Removes everything stored for an upload whose row said `state` (nil: no state recorded):
  /// its keys and its multipart upload. A row that says `assembled` may be one whose node
  /// died between recording it and completing: its multipart upload is aborted too, and a
  /// store that refuses to abort one that was completed is not an error.
  package func removeUpload(_ id: String, state: SharedUploadState?) throws {
    let data = state?.data ?? "data"
    guard state?.assembled == true, let multipart = state?.multipart else {
      return try removeUpload(id, data: data, multipart: state?.multipart)
    }
    try removeUpload(id, data: data, multipart: nil)
    try? removeUpload(id, data: data, multipart: multipart)
  }
}

/// What the catalog row of an upload in shared mode records besides its offset (the
/// `shared_state` column, JSON): enough for any node to continue or finish it.
package struct SharedUploadState: Codable, Equatable, Sendable {
  package struct Part: Codable, Equatable, Sendable {
    package var number: Int
    package var etag: String
    package var size: Int64
    /// The lease epoch of the holder that sent it (nil: recorded before epochs existed, 0).
    package var epoch: Int64?
    /// Hex MD5 of the bytes as read from the staging file and sent; nil for a part copied
    /// server-side (reopening), known by the store's ETag only.
    package var md5: String?
    package init(number: Int, etag: String, size: Int64, epoch: Int64? = nil, md5: String? = nil) {
      self.number = number
      self.etag = etag
      self.size = size
      self.epoch = epoch
      self.md5 = md5
    }
  }

  struct Piece: Codable, Equatable, Sendable {
    var name: String
    var size: Int64
  }

  /// The S3 multipart upload, once the first part is sent.
  var multipart: String?
  /// The name of the object the parts are assembled into, `uploads/<id>/<data>`: `data`, then
  /// `data-2`… after each reopening (a new multipart upload copying from the old object, which
  /// some stores refuse to do onto the same key).
  var data = "data"
  var parts: [Part] = []
  /// What arrived after the parts, in order: the staging file's content.
  var pieces: [Piece] = []
  /// The SHA-256 state after `offset` bytes (`Digest.savedState()`, base64); nil at 0.
  var sha256: String?
  /// The parts were assembled into `uploads/<id>/data` (a finished partial upload, or a publish
  /// that has begun).
  var assembled = false

  /// The number of the next part a holder of lease `epoch` sends: one past the last recorded
  /// part, plus the epochs that moved since that part's holder. Every holder that took over
  /// since then (and the one that recorded it, which may still send one late part after
  /// stalling) numbered its next part with a smaller epoch, so none of their parts, however
  /// late it lands, has this number: a stalled node cannot replace the new holder's part.
  /// Numbers grow by one per part, plus one per takeover.
  func nextPartNumber(epoch: Int64) -> Int {
    let last = parts.last
    return (last?.number ?? 0) + 1 + Int(max(0, epoch - (last?.epoch ?? 0)))
  }

  /// Whether the ETag the store gave the assembled object says it is these parts' bytes as
  /// they were sent. S3's multipart ETag is hex(MD5(the parts' binary MD5s, in order))-count:
  /// it is computed from the MD5s this node took as it read each part from its staging file
  /// (a copied part counts by its ETag). A store whose ETag has another form (no `-count`) is
  /// checked part by part instead: each part's ETag must be its MD5. A store whose part ETags
  /// are not MD5s (AWS with SSE-KMS or SSE-C) fails the check: not supported for shared uploads.
  func assemblyMatches(etag: String) -> Bool {
    let etag = etag.lowercased()
    if let dash = etag.lastIndex(of: "-"), Hex.decode(String(etag[..<dash]))?.count == 16 {
      var concatenated: [UInt8] = []
      for part in parts {
        guard let md5 = Hex.decode(part.md5 ?? part.etag), md5.count == 16 else { return false }
        concatenated += md5
      }
      return etag == Hex.encode(Digest.hash(.md5, concatenated)) + "-\(parts.count)"
    }
    return parts.allSatisfy { $0.md5 == nil || $0.md5?.lowercased() == $0.etag.lowercased() }
  }

  /// Where the staging file starts in the upload: the bytes the parts hold.
  var base: Int64 { parts.reduce(0) { $0 + $1.size } }
  /// The bytes the pieces hold.
  var piecesSize: Int64 { pieces.reduce(0) { $0 + $1.size } }

  init() {}

  init?(json: String?) {
    guard let json, let state = try? JSONDecoder().decode(Self.self, from: Data(json.utf8)) else { return nil }
    self = state
  }

  var json: String {
    // Encoding plain strings and integers cannot fail.
    String(decoding: (try? JSONEncoder().encode(self)) ?? Data("{}".utf8), as: UTF8.self)
  }
}
