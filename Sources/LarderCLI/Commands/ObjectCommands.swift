import Foundation
import Larder

struct PutCommand: Command {
  static let source = Positional("FILE", help: "the local file to store; - for standard input")
  static let object = Positional("BUCKET/NAME", help: "where to store it")
  static let contentType = Option.value(
    "--content-type", "TYPE", help: "the declared type (default: the type libmagic detects in the content)")
  static let metadata = Option.repeated("--metadata", "k=v", help: "custom metadata")
  static let maxSize = Option.value("--max-size", "SIZE", help: "refuse (exit 1) content larger than this")
  static let json = Option.flag("--json", help: "print the stored object's metadata as JSON")

  static let configuration = CommandConfiguration(
    name: "put", summary: "store a local file as BUCKET/NAME",
    discussion: "The declared type is --content-type, else the type libmagic detects in the content.",
    positionals: [source, object], options: [contentType, metadata, maxSize, json],
    groups: [StoreOptions.self])

  var store: StoreOptions
  var source: String
  var bucket: String
  var name: String
  var contentType: String?
  var metadata: [String: String] = [:]
  var maxSize: Int64?
  var json: Bool

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    contentType = arguments.value(Self.contentType)
    for pair in arguments.values(Self.metadata) {
      guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
        throw UsageError("--metadata takes key=value, got '\(pair)'")
      }
      metadata[String(pair[..<eq])] = String(pair[pair.index(after: eq)...])
    }
    maxSize = try arguments.value(Self.maxSize).map { text throws(UsageError) in try parseSize(text) }
    json = arguments.flag(Self.json)
    source = arguments.required(Self.source)
    (bucket, name) = try parseObjectPath(arguments.required(Self.object))
  }

  func run() throws {
    let larder = try store.open()
    let writer = try larder.files.makeWriter(options: .init(sizeLimit: maxSize))
    let fd: Int32 = source == "-" ? STDIN_FILENO : open(source, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw CommandFailure("cannot open \(source): \(String(cString: strerror(errno)))") }
    defer { if fd != STDIN_FILENO { close(fd) } }
    var st = stat()
    fstat(fd, &st)
    let progress = ProgressBar(total: Int64(st.st_size), label: "put")
    var buffer = [UInt8](repeating: 0, count: 1 << 20)
    while true {
      let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      if n < 0 {
        if errno == EINTR { continue }
        throw CommandFailure("cannot read \(source): \(String(cString: strerror(errno)))")
      }
      if n == 0 { break }
      try buffer.withUnsafeBytes { try writer.write(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
      progress.update(writer.byteCount)
    }
    progress.finish()
    let staged = try writer.finish()
    // Without --content-type the CLI declares what libmagic found (the HTTP API keeps Firebase's
    // semantics: the client's declaration, else application/octet-stream).
    let object = try larder.objects.put(
      bucket: bucket, name: name, staged: staged,
      options: .init(
        declaredContentType: contentType ?? staged.contentType,
        filename: source == "-" ? nil : URL(fileURLWithPath: source).lastPathComponent, metadata: metadata))
    if json {
      print(try Output.json(object.firebaseMetadata))
    } else {
      print(
        "\(object.bucket)/\(object.name)  \(object.file.size) bytes  \(object.contentType)  sha256:\(object.file.sha256)"
      )
    }
  }
}

struct GetCommand: Command {
  static let object = Positional("BUCKET/NAME", help: "the object to read")
  static let output = Option.value(
    "--output", "FILE", aliases: ["-o"],
    help: "write here (through a temporary file) instead of standard output")
  static let maxSize = Option.value(
    "--max-size", "SIZE", help: "refuse (exit 1) content larger than this before writing anything")

  static let configuration = CommandConfiguration(
    name: "get", summary: "write BUCKET/NAME to a file or standard output",
    positionals: [object], options: [output, maxSize], groups: [StoreOptions.self])

  var store: StoreOptions
  var bucket: String
  var name: String
  var output: String?
  var maxSize: Int64?

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    output = arguments.value(Self.output)
    maxSize = try arguments.value(Self.maxSize).map { text throws(UsageError) in try parseSize(text) }
    (bucket, name) = try parseObjectPath(arguments.required(Self.object))
  }

  func run() throws {
    let larder = try store.open()
    let object = try larder.objects.get(bucket: bucket, name: name)
    if let maxSize, object.file.size > maxSize {
      throw LarderError.downloadSizeExceeded(size: object.file.size, maxSize: maxSize)
    }
    // Local blobs are opened before the output exists; S3 streams once it does.
    let reader = try larder.files.openLocal(object.file)
    var fd = STDOUT_FILENO
    var temp: String?
    if let output, output != "-" {
      // Write beside the target and rename, so a failed download never leaves a partial file.
      temp = output + ".larder-partial"
      fd = open(temp!, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
      guard fd >= 0 else {
        throw CommandFailure("cannot create \(temp!): \(String(cString: strerror(errno)))")
      }
    }
    let progress = ProgressBar(total: reader?.size ?? object.file.size, label: "get")
    var written: Int64 = 0
    let out = FileHandle(fileDescriptor: fd, closeOnDealloc: false)
    do {
      let each: (UnsafeRawBufferPointer) throws -> Void = { chunk in
        do {
          try out.write(contentsOf: chunk)
        } catch {
          let posix = (error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError
          let reason = posix.map { String(cString: strerror(Int32($0.code))) } ?? "\(error)"
          throw CommandFailure("cannot write the output: \(reason)")
        }
        written += Int64(chunk.count)
        progress.update(written)
      }
      if let reader { try reader.forEachChunk(each) } else { try larder.files.read(object.file, each) }
    } catch {
      if let temp {
        close(fd)
        unlink(temp)
      }
      throw error
    }
    progress.finish()
    if let temp, let output {
      fsync(fd)
      close(fd)
      guard rename(temp, output) == 0 else {
        unlink(temp)
        throw CommandFailure("cannot rename to \(output): \(String(cString: strerror(errno)))")
      }
    }
  }
}

struct ListCommand: Command {
  static let target = Positional(
    "BUCKET[/PREFIX]", optional: true, help: "the bucket (and name prefix) to list; without it, the buckets")
  static let recursive = Option.flag(
    "--recursive", aliases: ["-r"], help: "list every name under the prefix instead of folding at '/'")
  static let json = Option.flag("--json", help: "print the listing as JSON")

  static let configuration = CommandConfiguration(
    name: "ls", summary: "list objects of BUCKET[/PREFIX], or the buckets",
    discussion: "Without --recursive, names continuing past a '/' are folded into their prefix.",
    positionals: [target], options: [recursive, json], groups: [StoreOptions.self])

  var store: StoreOptions
  var target: String?
  var recursive: Bool
  var json: Bool

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    recursive = arguments.flag(Self.recursive)
    json = arguments.flag(Self.json)
    target = arguments.value(Self.target)
  }

  func run() throws {
    let larder = try store.open()
    guard let target else {
      let buckets = try larder.statistics().buckets
      if json {
        print(try Output.json(buckets.map { ["bucket": $0.name, "objects": String($0.objectCount)] }))
      } else {
        for bucket in buckets { print("\(bucket.name)/\t\(bucket.objectCount) objects") }
      }
      return
    }
    let (bucket, prefix) = parseBucketPrefix(target)
    var token: String?
    var items: [FirebaseObjectMetadata] = []
    var prefixes: [String] = []
    repeat {
      let page = try larder.objects.list(
        bucket: bucket, prefix: prefix, delimiter: recursive ? nil : "/", maxResults: 1000, pageToken: token)
      if json {
        items += page.items.map(\.firebaseMetadata)
        prefixes += page.prefixes
      } else {
        for p in page.prefixes { print("\(p)") }
        for item in page.items {
          print(
            "\(item.name)\t\(item.file.size)\t\(item.contentType)\t\(StoredObject.timestamp(item.updated))")
        }
      }
      token = page.nextPageToken
    } while token != nil
    if json {
      struct Listing: Encodable {
        var prefixes: [String]
        var items: [FirebaseObjectMetadata]
      }
      print(try Output.json(Listing(prefixes: prefixes, items: items)))
    }
  }
}

struct StatCommand: Command {
  static let object = Positional("BUCKET/NAME", help: "the object")
  static let json = Option.flag("--json", help: "print the metadata as JSON (the Firebase shape)")

  static let configuration = CommandConfiguration(
    name: "stat", summary: "print the metadata of BUCKET/NAME",
    positionals: [object], options: [json], groups: [StoreOptions.self])

  var store: StoreOptions
  var bucket: String
  var name: String
  var json: Bool

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    json = arguments.flag(Self.json)
    (bucket, name) = try parseObjectPath(arguments.required(Self.object))
  }

  func run() throws {
    let larder = try store.open()
    var object = try larder.objects.get(bucket: bucket, name: name)
    // `stat` is a caller that wants the MD5 now, also for content whose background hash is pending.
    object.file = try larder.files.withMD5(object.file)
    let m = object.firebaseMetadata
    if json {
      print(try Output.json(m))
      return
    }
    print("name:          \(m.bucket)/\(m.name)")
    print("size:          \(m.size)")
    print("contentType:   \(m.contentType)")
    print("detectedType:  \(m.detectedContentType)")
    print("sha256:        \(m.sha256)")
    print("md5Hash:       \(m.md5Hash ?? "")")
    print("generation:    \(m.generation)")
    print("metageneration:\(m.metageneration)")
    print("timeCreated:   \(m.timeCreated)")
    print("updated:       \(m.updated)")
    for (k, v) in (m.metadata ?? [:]).sorted(by: { $0.key < $1.key }) { print("metadata.\(k): \(v)") }
  }
}

struct RemoveCommand: Command {
  static let object = Positional("BUCKET/NAME", help: "the object to remove")

  static let configuration = CommandConfiguration(
    name: "rm", summary: "remove BUCKET/NAME (its bytes go when the collector runs)",
    positionals: [object], groups: [StoreOptions.self])

  var store: StoreOptions
  var bucket: String
  var name: String

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    (bucket, name) = try parseObjectPath(arguments.required(Self.object))
  }

  func run() throws {
    try store.open().objects.delete(bucket: bucket, name: name)
  }
}
