import Foundation
import Larder
import LarderAuth

struct PutCommand: Command {
  static let source = Positional(
    "FILE", help: "the local file to store (- for standard input), or a folder of files")
  static let object = Positional(
    "BUCKET/NAME",
    help: "where to store it; for a folder BUCKET[/PREFIX], under which its files keep their paths")
  static let contentType = Option.value(
    "--content-type", "TYPE", help: "the declared type (default: the type libmagic detects in the content)")
  static let metadata = Option.repeated("--metadata", "k=v", help: "custom metadata")
  static let maxSize = Option.value("--max-size", "SIZE", help: "refuse (exit 1) content larger than this")
  static let json = Option.flag("--json", help: "print the stored object's metadata as JSON")

  static let configuration = CommandConfiguration(
    name: "put", summary: "store a local file (or a folder's files) as BUCKET/NAME",
    discussion: """
      The declared type is --content-type, else the type libmagic detects in the content. With
      --server, files of 8 MiB and more go up in a resumable session: run the same command again
      after an interruption and it continues where the server stopped.
      """,
    positionals: [source, object], options: [contentType, metadata, maxSize, json],
    groups: [ObjectOptions.self])

  var target: ObjectOptions
  var source: String
  var isDirectory: Bool
  var bucket: String
  var name: String
  var options = PutOptions()
  var json: Bool

  init(_ arguments: ParsedArguments) throws(UsageError) {
    target = try ObjectOptions(arguments)
    options.contentType = arguments.value(Self.contentType)
    for pair in arguments.values(Self.metadata) {
      guard let eq = pair.firstIndex(of: "="), eq != pair.startIndex else {
        throw UsageError("--metadata takes key=value, got '\(pair)'")
      }
      options.metadata[String(pair[..<eq])] = String(pair[pair.index(after: eq)...])
    }
    options.maxSize = try arguments.value(Self.maxSize).map { text throws(UsageError) in try parseSize(text) }
    json = arguments.flag(Self.json)
    source = arguments.required(Self.source)
    isDirectory = source != "-" && fileStatus(source).map { $0.st_mode & S_IFMT == S_IFDIR } == true
    if isDirectory {
      (bucket, name) = parseBucketPrefix(arguments.required(Self.object))
      guard !bucket.isEmpty else {
        throw UsageError("'\(arguments.required(Self.object))' is not BUCKET[/PREFIX]")
      }
    } else {
      (bucket, name) = try parseObjectPath(arguments.required(Self.object))
    }
  }

  func run() throws {
    if source != "-", !isDirectory, fileStatus(source) == nil {
      throw CommandFailure("cannot open \(source): \(errnoText)")
    }
    let service = try target.open()
    try BucketName.requireCreatable(bucket, in: service)
    guard isDirectory else {
      let size = source == "-" ? 0 : Int64(fileStatus(source)?.st_size ?? 0)
      let progress = ProgressBar(total: size, label: "put")
      let object = try service.put(
        path: source, bucket: bucket, name: name, options: options, progress: { progress.update($0) })
      progress.finish()
      print(json ? try Output.json(object.json()) : object.storedLine)
      return
    }
    // A folder: its regular files, by path, under the prefix as a folder.
    let files = try FolderWalk.files(in: source)
    let prefix = name.isEmpty || name.hasSuffix("/") ? name : name + "/"
    let total = files.reduce(Int64(0)) { $0 + $1.size }
    let progress = ProgressBar(total: total, label: "put \(files.count) files")
    var done: Int64 = 0
    var stored: [ObjectFacts] = []
    for file in files {
      let base = done
      let object = try service.put(
        path: source + "/" + file.relativePath, bucket: bucket, name: prefix + file.relativePath,
        options: options, progress: { progress.update(base + $0) })
      done += file.size
      progress.update(done)
      if json { stored.append(object) } else { print(object.storedLine) }
    }
    progress.finish()
    if json { print(try Output.json(stored.map { $0.json() })) }
  }
}

struct GetCommand: Command {
  static let object = Positional(
    "BUCKET/NAME", help: "the object to read; with --recursive, BUCKET[/PREFIX]: the folder to read")
  static let output = Option.value(
    "--output", "FILE", aliases: ["-o"],
    help: "write here (through a temporary file) instead of standard output")
  static let maxSize = Option.value(
    "--max-size", "SIZE", help: "refuse (exit 1) content larger than this before writing anything")
  static let range = Option.value(
    "--range", "FIRST-LAST",
    help: "only these bytes (0-99 the first hundred, 100- from 100 on, -100 the last hundred)")
  static let recursive = Option.flag(
    "--recursive", aliases: ["-r"],
    help: "every object under the folder, written into the --output folder by path")

  static let configuration = CommandConfiguration(
    name: "get",
    summary: "write BUCKET/NAME to a file or standard output (or a folder's objects to a folder)",
    positionals: [object], options: [output, maxSize, range, recursive], groups: [ObjectOptions.self])

  var target: ObjectOptions
  var bucket: String
  var name: String
  var output: String?
  var maxSize: Int64?
  var range: ByteRange?
  var recursive: Bool

  init(_ arguments: ParsedArguments) throws(UsageError) {
    target = try ObjectOptions(arguments)
    output = arguments.value(Self.output)
    maxSize = try arguments.value(Self.maxSize).map { text throws(UsageError) in try parseSize(text) }
    range = try arguments.value(Self.range).map { text throws(UsageError) in try ByteRange(parsing: text) }
    recursive = arguments.flag(Self.recursive)
    if recursive {
      guard let output, output != "-" else { throw UsageError("--recursive needs --output DIR") }
      if range != nil { throw UsageError("--range reads one object, not a folder (--recursive)") }
      (bucket, name) = parseBucketPrefix(arguments.required(Self.object))
      guard !bucket.isEmpty else {
        throw UsageError("'\(arguments.required(Self.object))' is not BUCKET[/PREFIX]")
      }
    } else {
      (bucket, name) = try parseObjectPath(arguments.required(Self.object))
    }
  }

  func run() throws {
    let service = try target.open()
    guard recursive, let output else {
      let object = try service.object(bucket: bucket, name: name)
      let bytes = try range.map { try $0.resolved(size: object.size) } ?? 0..<object.size
      if let maxSize, Int64(bytes.count) > maxSize {
        throw LarderError.downloadSizeExceeded(size: Int64(bytes.count), maxSize: maxSize)
      }
      let progress = ProgressBar(total: Int64(bytes.count), label: "get")
      try Download.write(object, range: bytes, from: service, to: output, server: target.server) {
        progress.update($0)
      }
      progress.finish()
      return
    }
    // A folder: every object under it, written under the output folder by its path below it.
    let prefix = name.isEmpty || name.hasSuffix("/") ? name : name + "/"
    var objects: [ObjectFacts] = []
    var token: String?
    repeat {
      let page = try service.listPage(
        bucket: bucket, prefix: prefix, delimiter: nil, maxResults: 1000, pageToken: token)
      objects += page.items.filter { !$0.name.hasSuffix("/") }
      token = page.nextPageToken
    } while token != nil
    if let maxSize, let big = objects.first(where: { $0.size > maxSize }) {
      throw LarderError.downloadSizeExceeded(size: big.size, maxSize: maxSize)
    }
    let paths = try objects.map { object in
      let relative = String(object.name.dropFirst(prefix.count))
      guard FolderWalk.isSafeRelativePath(relative) else {
        throw CommandFailure("\(object.bucket)/\(object.name) cannot be written as a file under \(output)")
      }
      return output + "/" + relative
    }
    let progress = ProgressBar(total: objects.reduce(0) { $0 + $1.size }, label: "get \(objects.count) files")
    var done: Int64 = 0
    for (object, path) in zip(objects, paths) {
      do {
        try FileManager.default.createDirectory(
          atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
      } catch {
        throw CommandFailure("cannot create the folder for \(path): \(POSIXFailure.reason(error))")
      }
      let base = done
      try Download.write(object, range: 0..<object.size, from: service, to: path, server: target.server) {
        progress.update(base + $0)
      }
      done += object.size
      progress.update(done)
    }
    progress.finish()
  }
}

struct ListCommand: Command {
  static let target = Positional(
    "BUCKET[/PREFIX]", optional: true,
    help: "the bucket (and folder or name prefix) to list; without it, the buckets")
  static let recursive = Option.flag(
    "--recursive", aliases: ["-r"], help: "list every name under the prefix instead of folding at '/'")
  static let json = Option.flag("--json", help: "print the listing as JSON")

  static let configuration = CommandConfiguration(
    name: "ls", summary: "list objects of BUCKET[/PREFIX], or the buckets",
    discussion: """
      Without --recursive, names continuing past a '/' are folded into their prefix. A PREFIX that
      names a folder lists the folder, with or without its trailing '/' (ls app/users/dev is
      ls app/users/dev/), as gsutil does.
      """,
    positionals: [target], options: [recursive, json], groups: [ObjectOptions.self])

  var objects: ObjectOptions
  var target: String?
  var recursive: Bool
  var json: Bool

  init(_ arguments: ParsedArguments) throws(UsageError) {
    objects = try ObjectOptions(arguments)
    recursive = arguments.flag(Self.recursive)
    json = arguments.flag(Self.json)
    target = arguments.value(Self.target)
  }

  func run() throws {
    let service = try objects.open()
    guard let target else {
      let buckets = try service.buckets()
      if json {
        print(
          try Output.json(
            buckets.map { b in
              ["bucket": b.name].merging(b.objects.map { ["objects": String($0)] } ?? [:]) { a, _ in a }
            }
          ))
      } else {
        for b in buckets { print("\(b.name)/" + (b.objects.map { "\t\($0) objects" } ?? "")) }
      }
      return
    }
    var (bucket, prefix) = parseBucketPrefix(target)
    // `app/users/dev` names the folder when there is one.
    if !prefix.isEmpty, !prefix.hasSuffix("/"),
      !(try service.listPage(
        bucket: bucket, prefix: prefix + "/", delimiter: nil, maxResults: 1, pageToken: nil))
        .items.isEmpty
    {
      prefix += "/"
    }
    var token: String?
    var items: [ObjectFacts] = []
    var prefixes: [String] = []
    repeat {
      let page = try service.listPage(
        bucket: bucket, prefix: prefix, delimiter: recursive ? nil : "/", maxResults: 1000, pageToken: token)
      if json {
        items += page.items
        prefixes += page.prefixes
      } else {
        for p in page.prefixes { print(p) }
        for item in page.items { print(item.listingLine) }
      }
      token = page.nextPageToken
    } while token != nil
    if json {
      print(
        try Output.json(
          JSONValue.object([
            "prefixes": .array(prefixes.map { .string($0) }), "items": .array(items.map { $0.json() }),
          ])))
    }
  }
}

struct StatCommand: Command {
  static let object = Positional("BUCKET/NAME", help: "the object")
  static let json = Option.flag(
    "--json", help: "print the metadata as JSON (the Firebase shape; with --server, the GCS object resource)")

  static let configuration = CommandConfiguration(
    name: "stat", summary: "print the metadata of BUCKET/NAME",
    positionals: [object], options: [json], groups: [ObjectOptions.self])

  var target: ObjectOptions
  var bucket: String
  var name: String
  var json: Bool

  init(_ arguments: ParsedArguments) throws(UsageError) {
    target = try ObjectOptions(arguments)
    json = arguments.flag(Self.json)
    (bucket, name) = try parseObjectPath(arguments.required(Self.object))
  }

  func run() throws {
    let object = try target.open().stat(bucket: bucket, name: name)
    if json {
      print(try Output.json(object.json()))
    } else {
      for line in object.statLines { print(line) }
    }
  }
}

struct RemoveCommand: Command {
  static let object = Positional("BUCKET/NAME", help: "the object to remove")

  static let configuration = CommandConfiguration(
    name: "rm", summary: "remove BUCKET/NAME (its bytes go when the collector runs)",
    positionals: [object], groups: [ObjectOptions.self])

  var target: ObjectOptions
  var bucket: String
  var name: String

  init(_ arguments: ParsedArguments) throws(UsageError) {
    target = try ObjectOptions(arguments)
    (bucket, name) = try parseObjectPath(arguments.required(Self.object))
  }

  func run() throws {
    try target.open().delete(bucket: bucket, name: name)
  }
}

struct CopyCommand: Command {
  static let source = Positional("BUCKET/NAME", help: "the object to copy")
  static let destination = Positional("BUCKET2/NAME2", help: "the new object (replaced if it exists)")
  static let json = Option.flag("--json", help: "print the new object's metadata as JSON")

  static let configuration = CommandConfiguration(
    name: "cp", summary: "copy BUCKET/NAME to BUCKET2/NAME2 (no bytes move: content is addressed)",
    positionals: [source, destination], options: [json], groups: [ObjectOptions.self])

  var target: ObjectOptions
  var from: (bucket: String, name: String)
  var to: (bucket: String, name: String)
  var json: Bool

  init(_ arguments: ParsedArguments) throws(UsageError) {
    target = try ObjectOptions(arguments)
    json = arguments.flag(Self.json)
    from = try parseObjectPath(arguments.required(Self.source))
    to = try parseObjectPath(arguments.required(Self.destination))
  }

  func run() throws {
    let service = try target.open()
    try BucketName.requireCreatable(to.bucket, in: service)
    let object = try service.copy(from: from, to: to)
    print(json ? try Output.json(object.json()) : object.storedLine)
  }
}
