import Foundation
import Larder

/// Writing an object's bytes to standard output or a file, the same for either service.
enum Download {
  /// Streams `range` of `object` to `output` (standard output when nil or `-`). A file is
  /// written beside its target (`OUTPUT.larder-partial`) and renamed at the end, so a failed
  /// download never leaves a partial file under the target's name.
  ///
  /// From a `server`, a whole object's partial file is kept when the download fails (or the
  /// process dies), with the generation it holds remembered (``TransferStateFile``): the same
  /// command continues from its end, if the object is still that generation.
  static func write(
    _ object: ObjectFacts, range: Range<Int64>, from service: any ObjectTarget, to output: String?,
    server: String? = nil, progress: (Int64) -> Void
  ) throws {
    var fd = STDOUT_FILENO
    var temp: String?
    var resumable: TransferStateFile<PartialDownload>?
    var start = range.lowerBound
    if let output, output != "-" {
      let folder = (output as NSString).deletingLastPathComponent
      if !folder.isEmpty, fileStatus(folder) == nil {
        throw CommandFailure("cannot write \(output): the folder \(folder) does not exist")
      }
      let partial = output + ".larder-partial"
      temp = partial
      let absolute = URL(fileURLWithPath: output).standardizedFileURL.path
      let objectPath = "\(object.bucket)/\(object.name)"
      if let server, range == 0..<object.size {
        resumable = TransferStateFile(kind: "downloads", key: [server, objectPath, absolute])
      }
      let held = fileStatus(partial).map { Int64($0.st_size) } ?? 0
      if let saved = resumable?.load(), saved.generation == object.generation, held > 0, held <= object.size {
        fd = open(partial, O_WRONLY | O_APPEND | O_CLOEXEC)
        start = held
        Output.note("larder: resuming the download of \(objectPath) at \(held) of \(object.size) bytes")
      } else {
        fd = open(partial, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        resumable?.save(
          .init(server: server ?? "", object: objectPath, generation: object.generation, output: absolute))
      }
      // Named by the target: the temporary file is the CLI's business.
      guard fd >= 0 else { throw CommandFailure("cannot write \(output): \(errnoText)") }
    }
    var written = start - range.lowerBound
    progress(written)
    let out = FileHandle(fileDescriptor: fd, closeOnDealloc: false)
    do {
      try service.read(object, range: start..<range.upperBound) { chunk in
        do {
          try out.write(contentsOf: chunk)
        } catch {
          throw CommandFailure("cannot write the output: \(POSIXFailure.reason(error))")
        }
        written += Int64(chunk.count)
        progress(written)
      }
    } catch {
      if let temp {
        close(fd)
        if resumable == nil {
          unlink(temp)
        } else {
          Output.note("larder: what arrived is kept; run the same command again to continue")
        }
      }
      throw error
    }
    if let temp, let output {
      fsync(fd)
      close(fd)
      guard rename(temp, output) == 0 else {
        let reason = errnoText
        unlink(temp)
        resumable?.remove()
        throw CommandFailure("cannot write \(output): \(reason)")
      }
      resumable?.remove()
    }
  }
}

/// `--range FIRST-LAST`, `FIRST-` or `-SUFFIX`, as HTTP's `Range: bytes=` spells it.
struct ByteRange {
  var first: Int64?
  var last: Int64?

  init(parsing text: String) throws(UsageError) {
    let parts = text.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false)
    let bad = UsageError("'\(text)' is not a byte range (e.g. 0-99, 100-, -100)")
    guard parts.count == 2 else { throw bad }
    first = parts[0].isEmpty ? nil : Int64(parts[0])
    last = parts[1].isEmpty ? nil : Int64(parts[1])
    guard first != nil || last != nil, parts[0].isEmpty || (first ?? -1) >= 0,
      parts[1].isEmpty || (last ?? -1) >= 0
    else { throw bad }
    if let first, let last, last < first { throw bad }
  }

  /// The bytes of a `size`-byte object this names.
  /// - Throws: ``CommandFailure`` when none of them exist.
  func resolved(size: Int64) throws -> Range<Int64> {
    switch (first, last) {
    case (let first?, let last):
      guard first < size else {
        throw CommandFailure("the range starts at byte \(first), but the object has \(size) bytes")
      }
      return first..<min(size, (last ?? size - 1) + 1)
    case (nil, let suffix?):
      return max(0, size - suffix)..<size
    case (nil, nil):
      return 0..<size
    }
  }
}

/// Bucket names as GCS takes them: 3 to 63 characters (up to 222 with dots, 63 between dots) of
/// lower-case letters, digits, `-`, `_` and `.`, starting and ending with a letter or digit.
///
/// The store accepts more (1 to 222 characters, so that existing data keeps working); the CLI
/// refuses to *create* a bucket GCS would refuse, so `put f a/x.txt` does not make a bucket `a`
/// by a slip. Writing into an existing bucket of another name still works.
enum BucketName {
  /// Why `name` is not a GCS bucket name, or nil.
  static func problem(_ name: String) -> String? { ObjectName.creatableBucketProblem(name) }

  /// Refuses a write that would create a bucket GCS would not accept.
  static func requireCreatable(_ bucket: String, in service: any ObjectTarget) throws {
    guard let problem = problem(bucket) else { return }
    // A name the store refuses too, or a server that cannot be asked, is the write's own error.
    guard
      let page = try? service.listPage(
        bucket: bucket, prefix: "", delimiter: nil, maxResults: 1, pageToken: nil),
      page.items.isEmpty
    else { return }
    throw CommandFailure(
      "refusing to create the bucket '\(bucket)': \(problem) (bucket names are 3 to 63 lower-case letters, digits, '-', '_' and '.', as in GCS); did you mean BUCKET/\(bucket)/…?"
    )
  }
}

/// The regular files under a local folder, for `put DIR`; and which object paths may become
/// files under one, for `get --recursive`.
enum FolderWalk {
  struct Entry {
    /// `a/b.txt`, '/'-separated.
    var relativePath: String
    var size: Int64
  }

  /// Every regular file under `root` (symbolic links are not followed), by path.
  static func files(in root: String) throws -> [Entry] {
    guard let walker = FileManager.default.enumerator(atPath: root) else {
      throw CommandFailure("cannot read the folder \(root)")
    }
    var entries: [Entry] = []
    while let relative = walker.nextObject() as? String {
      var st = stat()
      guard lstat(root + "/" + relative, &st) == 0 else {
        throw CommandFailure("cannot read \(root)/\(relative): \(errnoText)")
      }
      if st.st_mode & S_IFMT == S_IFREG {
        entries.append(Entry(relativePath: relative, size: Int64(st.st_size)))
      }
    }
    return entries.sorted { $0.relativePath < $1.relativePath }
  }

  /// Whether an object's path below a folder can be a file below a local folder: no empty, `.`
  /// or `..` segment (a hostile server's names cannot climb out of the target).
  static func isSafeRelativePath(_ path: String) -> Bool {
    !path.isEmpty && !path.hasPrefix("/")
      && path.split(separator: "/", omittingEmptySubsequences: false).allSatisfy {
        !$0.isEmpty && $0 != "." && $0 != ".."
      }
  }
}
