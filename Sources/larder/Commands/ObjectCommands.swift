import Foundation
import Larder

struct PutCommand: Command {
  static let name = "put"
  static let summary = "store a local file as BUCKET/NAME"
  static let usage = """
    usage: larder put FILE BUCKET/NAME [--content-type T] [--metadata k=v]... [--max-size N] [--json] [--data DIR]
      FILE may be - for standard input. The stored type is sniffed from the content;
      --content-type is kept as the declared type.
    """
  var data: DataOptions
  var source: String
  var bucket: String
  var name: String
  var contentType: String?
  var metadata: [String: String] = [:]
  var maxSize: Int64?
  var json: Bool

  init(_ arguments: inout Arguments) throws(UsageError) {
    data = try DataOptions(&arguments)
    contentType = try arguments.option("--content-type")
    for pair in try arguments.options("--metadata") {
      guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
        throw UsageError("--metadata takes key=value, got '\(pair)'")
      }
      metadata[String(pair[..<eq])] = String(pair[pair.index(after: eq)...])
    }
    maxSize = try arguments.option("--max-size").map { text throws(UsageError) in try parseSize(text) }
    json = arguments.flag("--json")
    let pos = try arguments.finish(positionals: 2...2)
    source = pos[0]
    (bucket, name) = try parseObjectPath(pos[1])
  }

  func run() throws {
    let larder = try data.open()
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
    let object = try larder.objects.put(
      bucket: bucket, name: name, staged: try writer.finish(),
      options: .init(
        declaredContentType: contentType,
        filename: source == "-" ? nil : URL(fileURLWithPath: source).lastPathComponent, metadata: metadata))
    if json {
      print(try Output.json(object.firebaseMetadata))
    } else {
      print("\(object.bucket)/\(object.name)  \(object.file.size) bytes  \(object.contentType)  sha256:\(object.file.sha256)")
    }
  }
}

struct GetCommand: Command {
  static let name = "get"
  static let summary = "write BUCKET/NAME to a file or standard output"
  static let usage = """
    usage: larder get BUCKET/NAME [-o FILE] [--max-size N] [--data DIR]
      --max-size refuses (exit 1) content larger than N bytes before writing anything.
    """
  var data: DataOptions
  var bucket: String
  var name: String
  var output: String?
  var maxSize: Int64?

  init(_ arguments: inout Arguments) throws(UsageError) {
    data = try DataOptions(&arguments)
    let short = try arguments.option("-o")
    let long = try arguments.option("--output")
    output = short ?? long
    maxSize = try arguments.option("--max-size").map { text throws(UsageError) in try parseSize(text) }
    let pos = try arguments.finish(positionals: 1...1)
    (bucket, name) = try parseObjectPath(pos[0])
  }

  func run() throws {
    let larder = try data.open()
    let object = try larder.objects.get(bucket: bucket, name: name)
    if let maxSize, object.file.size > maxSize {
      throw LarderError.downloadSizeExceeded(size: object.file.size, maxSize: maxSize)
    }
    let reader = try larder.files.open(object.file)
    var fd = STDOUT_FILENO
    var temp: String?
    if let output, output != "-" {
      // Write beside the target and rename, so a failed download never leaves a partial file.
      temp = output + ".larder-partial"
      fd = open(temp!, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
      guard fd >= 0 else { throw CommandFailure("cannot create \(temp!): \(String(cString: strerror(errno)))") }
    }
    let progress = ProgressBar(total: reader.size, label: "get")
    var written: Int64 = 0
    let out = FileHandle(fileDescriptor: fd, closeOnDealloc: false)
    do {
      try reader.forEachChunk { chunk in
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
  static let name = "ls"
  static let summary = "list objects of BUCKET[/PREFIX], or the buckets"
  static let usage = """
    usage: larder ls [BUCKET[/PREFIX]] [--recursive] [--json] [--data DIR]
      Without --recursive, names continuing past a '/' are folded into their prefix.
    """
  var data: DataOptions
  var target: String?
  var recursive: Bool
  var json: Bool

  init(_ arguments: inout Arguments) throws(UsageError) {
    data = try DataOptions(&arguments)
    recursive = arguments.flag("--recursive", "-r")
    json = arguments.flag("--json")
    target = try arguments.finish(positionals: 0...1).first
  }

  func run() throws {
    let larder = try data.open()
    guard let target else {
      let buckets = try larder.catalog.read { db in
        try db.rows("SELECT bucket, count(*) AS n FROM objects GROUP BY bucket ORDER BY bucket")
      }
      if json {
        print(try Output.json(buckets.map { ["bucket": $0.string("bucket") ?? "", "objects": String($0.int("n") ?? 0)] }))
      } else {
        for row in buckets { print("\(row.string("bucket") ?? "")/\t\(row.int("n") ?? 0) objects") }
      }
      return
    }
    let bucket: String
    let prefix: String
    if let slash = target.firstIndex(of: "/") {
      bucket = String(target[..<slash])
      prefix = String(target[target.index(after: slash)...])
    } else {
      bucket = target
      prefix = ""
    }
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
          print("\(item.name)\t\(item.file.size)\t\(item.contentType)\t\(StoredObject.timestamp(item.updated))")
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
  static let name = "stat"
  static let summary = "print the metadata of BUCKET/NAME"
  static let usage = "usage: larder stat BUCKET/NAME [--json] [--data DIR]"
  var data: DataOptions
  var bucket: String
  var name: String
  var json: Bool

  init(_ arguments: inout Arguments) throws(UsageError) {
    data = try DataOptions(&arguments)
    json = arguments.flag("--json")
    (bucket, name) = try parseObjectPath(try arguments.finish(positionals: 1...1)[0])
  }

  func run() throws {
    let object = try data.open().objects.get(bucket: bucket, name: name)
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
    print("md5Hash:       \(m.md5Hash)")
    print("generation:    \(m.generation)")
    print("metageneration:\(m.metageneration)")
    print("timeCreated:   \(m.timeCreated)")
    print("updated:       \(m.updated)")
    for (k, v) in (m.metadata ?? [:]).sorted(by: { $0.key < $1.key }) { print("metadata.\(k): \(v)") }
  }
}

struct RemoveCommand: Command {
  static let name = "rm"
  static let summary = "remove BUCKET/NAME (its bytes go when the collector runs)"
  static let usage = "usage: larder rm BUCKET/NAME [--data DIR]"
  var data: DataOptions
  var bucket: String
  var name: String

  init(_ arguments: inout Arguments) throws(UsageError) {
    data = try DataOptions(&arguments)
    (bucket, name) = try parseObjectPath(try arguments.finish(positionals: 1...1)[0])
  }

  func run() throws {
    try data.open().objects.delete(bucket: bucket, name: name)
  }
}
