import Foundation
import Larder
import LarderAuth
import LarderCrypto

/// The objects of a data directory (or the catalog and blobs the store options name), opened
/// in this process.
struct LocalObjectTarget: ObjectTarget {
  let larder: Larder

  func buckets() throws -> [(name: String, objects: Int?)] {
    try larder.statistics().buckets.map { (name: $0.name, objects: Optional(Int($0.objectCount))) }
  }

  func listPage(bucket: String, prefix: String, delimiter: String?, maxResults: Int, pageToken: String?)
    throws
    -> ListingPage
  {
    let page = try larder.objects.list(
      bucket: bucket, prefix: prefix, delimiter: delimiter, maxResults: maxResults, pageToken: pageToken)
    return ListingPage(
      items: page.items.map(Self.facts), prefixes: page.prefixes, nextPageToken: page.nextPageToken)
  }

  func object(bucket: String, name: String) throws -> ObjectFacts {
    Self.facts(try larder.objects.get(bucket: bucket, name: name))
  }

  func stat(bucket: String, name: String) throws -> ObjectFacts {
    var object = try larder.objects.get(bucket: bucket, name: name)
    // `stat` is a caller that wants the hashes now, also for content whose background hash is pending.
    object.file = try larder.files.withChecksums(object.file)
    return Self.facts(object)
  }

  func put(
    path: String, bucket: String, name: String, options: PutOptions,
    progress: @escaping @Sendable (Int64) -> Void
  ) throws
    -> ObjectFacts
  {
    let writer = try larder.files.makeWriter(options: .init(sizeLimit: options.maxSize))
    let fd: Int32 = path == "-" ? STDIN_FILENO : open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw CommandFailure("cannot open \(path): \(String(cString: strerror(errno)))") }
    defer { if fd != STDIN_FILENO { close(fd) } }
    do {
      try forEachPiece(of: fd, path: path) { piece in
        try writer.write(piece)
        progress(writer.byteCount)
      }
    } catch {
      writer.cancel()
      throw error
    }
    let staged = try writer.finish()
    // Without --content-type the CLI declares what libmagic found (the HTTP API keeps Firebase's
    // semantics: the client's declaration, else application/octet-stream).
    let object = try larder.objects.put(
      bucket: bucket, name: name, staged: staged,
      options: .init(
        declaredContentType: options.contentType ?? staged.contentType,
        filename: path == "-" ? nil : URL(fileURLWithPath: path).lastPathComponent, metadata: options.metadata
      ))
    return Self.facts(object)
  }

  func read(_ object: ObjectFacts, range: Range<Int64>, _ body: (UnsafeRawBufferPointer) throws -> Void)
    throws
  {
    let stored = try larder.objects.get(bucket: object.bucket, name: object.name)
    guard stored.generation == object.generation else {
      throw CommandFailure("\(object.bucket)/\(object.name) changed while it was read; run the command again")
    }
    guard !range.isEmpty else { return }
    // Local blobs are read through their open descriptor; S3 streams.
    if range == 0..<stored.file.size, let reader = try larder.files.openLocal(stored.file) {
      try reader.forEachChunk(body)
    } else {
      try larder.files.read(stored.file, range: range, body)
    }
  }

  func delete(bucket: String, name: String) throws {
    try larder.objects.delete(bucket: bucket, name: name)
  }

  func copy(from source: (bucket: String, name: String), to destination: (bucket: String, name: String))
    throws
    -> ObjectFacts
  {
    let object = try larder.objects.copy(
      from: try ObjectPath(bucket: source.bucket, name: source.name),
      to: try ObjectPath(bucket: destination.bucket, name: destination.name),
      options: { found in
        ObjectWriteOptions(
          declaredContentType: found.contentType, filename: found.file.filename, metadata: found.metadata,
          cacheControl: found.cacheControl, contentDisposition: found.contentDisposition,
          contentEncoding: found.contentEncoding, contentLanguage: found.contentLanguage)
      })
    return Self.facts(object)
  }

  static func facts(_ object: StoredObject) -> ObjectFacts {
    let m = object.firebaseMetadata
    return ObjectFacts(
      bucket: object.bucket, name: object.name, size: object.file.size, contentType: object.contentType,
      generation: object.generation, metageneration: object.metageneration, timeCreated: m.timeCreated,
      updated: m.updated, md5Hash: m.md5Hash,
      crc32c: object.file.crc32c.map { Data(CRC32C.bytes($0)).base64EncodedString() }, sha256: m.sha256,
      detectedContentType: m.detectedContentType, metadata: object.metadata,
      json: {
        let encoder = JSONEncoder()
        return (try? encoder.encode(m)).flatMap { JSONValue.parse(Array($0)) } ?? .null
      })
  }
}
