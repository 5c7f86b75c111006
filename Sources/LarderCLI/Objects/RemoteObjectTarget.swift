import Foundation
import Larder
import LarderAuth
import LarderClient

/// The objects of a Larder server, over the GCS JSON API (``LarderClient``'s `gcs…` calls) with
/// a service-account key's access token (or none: the server's rules then judge an anonymous
/// caller).
struct RemoteObjectTarget: ObjectTarget {
  let server: String
  let client: LarderClient
  /// Files from this size up go through a resumable session (remembered across runs); smaller
  /// ones in one request.
  static let resumableThreshold: Int64 = 8 << 20
  /// Bytes per resumable chunk, and per ranged download request.
  static let chunkSize = 8 << 20

  /// The server's URL, if `server` is one.
  /// - Throws: ``UsageError`` when it is not `http(s)://HOST[:PORT][/PATH]`.
  @discardableResult
  static func validate(server: String) throws(UsageError) -> URL {
    guard let url = URL(string: server), url.scheme == "http" || url.scheme == "https", url.host != nil else {
      throw UsageError("--server must be http(s)://HOST[:PORT], got '\(server.prefix(100))'")
    }
    return url
  }

  init(server: String, credentials: ServiceAccountCredentials?) throws(UsageError) {
    let url = try Self.validate(server: server)
    self.server = server
    var token: LarderClient.TokenProvider?
    if let credentials { token = { try await credentials.token() } }
    client = LarderClient(baseURL: url, bucket: "", token: token, timeout: 120)
  }

  /// Runs one client call, turning its error into one readable line.
  func call<T: Sendable>(_ work: @escaping @Sendable (LarderClient) async throws -> T) throws -> T {
    let client = client
    do {
      return try waitFor { try await work(client) }
    } catch let error as LarderClientError {
      throw CommandFailure(Self.describe(error, server: server))
    }
  }

  static func describe(_ error: LarderClientError, server: String) -> String {
    switch error {
    case .server(let e): "\(server): \(e.code) \(e.message)"
    case .authentication(let m): m
    case .transport(let m): "cannot reach \(server): \(m)"
    default: "\(error)"
    }
  }

  func buckets() throws -> [(name: String, objects: Int?)] {
    try call { try await $0.gcsBuckets() }.map { (name: $0, objects: nil) }
  }

  func listPage(bucket: String, prefix: String, delimiter: String?, maxResults: Int, pageToken: String?)
    throws
    -> ListingPage
  {
    let page = try call {
      try await $0.gcsListPage(
        bucket: bucket, prefix: prefix, delimiter: delimiter, maxResults: maxResults, pageToken: pageToken)
    }
    return ListingPage(
      items: page.items.map(Self.facts), prefixes: page.prefixes, nextPageToken: page.nextPageToken)
  }

  func object(bucket: String, name: String) throws -> ObjectFacts { try stat(bucket: bucket, name: name) }

  func stat(bucket: String, name: String) throws -> ObjectFacts {
    Self.facts(try call { try await $0.gcsObject(bucket: bucket, name: name) })
  }

  func put(
    path: String, bucket: String, name: String, options: PutOptions,
    progress: @escaping @Sendable (Int64) -> Void
  ) throws
    -> ObjectFacts
  {
    // Standard input is spooled to a temporary file first: a resumable session needs to resend.
    if path == "-" {
      let spool = try Self.spoolStandardInput(maxSize: options.maxSize)
      defer { unlink(spool) }
      return try put(
        path: spool, bucket: bucket, name: name, options: options, progress: progress, resumable: false)
    }
    return try put(
      path: path, bucket: bucket, name: name, options: options, progress: progress, resumable: true)
  }

  private func put(
    path: String, bucket: String, name: String, options: PutOptions,
    progress: @escaping @Sendable (Int64) -> Void, resumable: Bool
  ) throws -> ObjectFacts {
    guard let st = fileStatus(path) else { throw CommandFailure("cannot open \(path): \(errnoText)") }
    let size = Int64(st.st_size)
    if let maxSize = options.maxSize, size > maxSize {
      throw LarderError.sizeLimitExceeded(limit: maxSize)
    }
    let contentType = try options.contentType ?? Self.detectedType(path)
    let metadata = options.metadata
    let url = URL(fileURLWithPath: path)
    guard size >= Self.resumableThreshold else {
      let data: Data
      do { data = try Data(contentsOf: url) } catch {
        throw CommandFailure("cannot read \(path): \(POSIXFailure.reason(error))")
      }
      let object = try call {
        try await $0.gcsUpload(data, bucket: bucket, name: name, contentType: contentType, metadata: metadata)
      }
      progress(size)
      return Self.facts(object)
    }
    let absolute = url.standardizedFileURL.path
    let remembered =
      resumable
      ? TransferStateFile<UploadSession>(
        kind: "uploads",
        key: [server, bucket, name, absolute, String(size), "\(st.st_mtim.tv_sec).\(st.st_mtim.tv_nsec)"])
      : nil
    var session: URL?
    if let saved = remembered?.load(), let url = URL(string: saved.session) {
      // Where the interrupted upload stands; a session the server no longer knows starts over.
      do {
        switch try waitFor({ [client] in try await client.gcsSessionState(url, size: size) }) {
        case .complete(let object):
          remembered?.remove()
          return Self.facts(object)
        case .incomplete(let offset):
          Output.note("larder: resuming the upload of \(path) at \(offset) of \(size) bytes")
          session = url
        }
      } catch LarderClientError.server(let e) where e.code == 404 || e.code == 410 {
        Output.note("larder: the interrupted upload of \(path) expired on the server; starting again")
      } catch let error as LarderClientError {
        throw CommandFailure(Self.describe(error, server: server))
      }
    }
    if session == nil {
      let started = try call {
        try await $0.gcsStartResumableUpload(
          bucket: bucket, name: name, size: size, contentType: contentType, metadata: metadata)
      }
      remembered?.save(
        .init(
          session: started.absoluteString, server: server, destination: "\(bucket)/\(name)", source: absolute,
          size: size))
      session = started
    }
    let target = session!
    let object = try call {
      try await $0.gcsResumeUpload(
        session: target, fileAt: url, chunkSize: Self.chunkSize, progress: { sent, _ in progress(sent) })
    }
    remembered?.remove()
    return Self.facts(object)
  }

  /// What libmagic finds in the file's first bytes: the type the CLI declares, as it does locally.
  static func detectedType(_ path: String) throws -> String {
    guard let handle = FileHandle(forReadingAtPath: path) else {
      throw CommandFailure("cannot open \(path): \(String(cString: strerror(errno)))")
    }
    defer { try? handle.close() }
    let head = (try? handle.read(upToCount: ContentSniffer.headLength)) ?? Data()
    return ContentSniffer.shared.mimeType(of: Array(head))
  }

  /// Standard input into a temporary file (refused past `maxSize`).
  static func spoolStandardInput(maxSize: Int64?) throws -> String {
    var template = Array((NSTemporaryDirectory() + "/larder-stdin-XXXXXX").utf8CString)
    let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
    guard fd >= 0 else {
      throw CommandFailure("cannot make a temporary file: \(String(cString: strerror(errno)))")
    }
    defer { close(fd) }
    let path = String(decoding: template.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    var total: Int64 = 0
    do {
      try forEachPiece(of: STDIN_FILENO, path: "standard input") { piece in
        total += Int64(piece.count)
        if let maxSize, total > maxSize { throw LarderError.sizeLimitExceeded(limit: maxSize) }
        guard write(fd, piece.baseAddress, piece.count) == piece.count else {
          throw CommandFailure("cannot write \(path): \(errnoText)")
        }
      }
    } catch {
      unlink(path)
      throw error
    }
    return path
  }

  func read(_ object: ObjectFacts, range: Range<Int64>, _ body: (UnsafeRawBufferPointer) throws -> Void)
    throws
  {
    // In ranges of one chunk, each pinned to the generation that was asked about.
    var offset = range.lowerBound
    while offset < range.upperBound {
      let piece = offset..<min(range.upperBound, offset + Int64(Self.chunkSize))
      let (bucket, name, generation) = (object.bucket, object.name, object.generation)
      let data: Data
      do {
        data = try waitFor { [client] in
          try await client.gcsDownload(bucket: bucket, name: name, range: piece, generation: generation)
        }
      } catch LarderClientError.server(let e) where e.code == 412 {
        throw CommandFailure("\(bucket)/\(name) changed while it was read; run the command again")
      } catch let error as LarderClientError {
        throw CommandFailure(Self.describe(error, server: server))
      }
      guard Int64(data.count) == piece.count else {
        throw CommandFailure("\(server) sent \(data.count) bytes for a range of \(piece.count)")
      }
      try data.withUnsafeBytes(body)
      offset = piece.upperBound
    }
  }

  func delete(bucket: String, name: String) throws {
    try call { try await $0.gcsDelete(bucket: bucket, name: name) }
  }

  func copy(from source: (bucket: String, name: String), to destination: (bucket: String, name: String))
    throws
    -> ObjectFacts
  {
    let (s, d) = ((source.bucket, source.name), (destination.bucket, destination.name))
    return Self.facts(try call { try await $0.gcsCopy(from: (s.0, s.1), to: (d.0, d.1)) })
  }

  static func facts(_ object: GcsObject) -> ObjectFacts {
    ObjectFacts(
      bucket: object.bucket, name: object.name, size: object.size,
      contentType: object.contentType ?? "application/octet-stream", generation: object.generation,
      metageneration: object.metageneration, timeCreated: object.timeCreated, updated: object.updated,
      md5Hash: object.md5Hash, crc32c: object.crc32c, metadata: object.metadata ?? [:],
      json: {
        if let raw = object.json, let value = JSONValue.parse(Array(raw)) { return value }
        var fields: [String: JSONValue] = [
          "kind": "storage#object", "name": .string(object.name), "bucket": .string(object.bucket),
          "size": .string(String(object.size)), "generation": .string(String(object.generation)),
          "metageneration": .string(String(object.metageneration)),
        ]
        if let type = object.contentType { fields["contentType"] = .string(type) }
        if let updated = object.updated { fields["updated"] = .string(updated) }
        if let created = object.timeCreated { fields["timeCreated"] = .string(created) }
        if let md5 = object.md5Hash { fields["md5Hash"] = .string(md5) }
        if let crc = object.crc32c { fields["crc32c"] = .string(crc) }
        if let metadata = object.metadata { fields["metadata"] = .object(metadata.mapValues { .string($0) }) }
        return .object(fields)
      })
  }
}
