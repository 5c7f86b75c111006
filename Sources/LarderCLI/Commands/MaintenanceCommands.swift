import Foundation
import Larder

struct GCCommand: Command {
  static let dryRun = Option.flag("--dry-run", help: "report what would be freed without changing anything")
  static let grace = Option.value(
    "--grace", "DURATION", default: "24h", help: "release unreferenced files only once older than this")
  static let json = Option.flag("--json", help: "print the report as JSON")

  static let configuration = CommandConfiguration(
    name: "gc", summary: "collect orphaned blobs, expired uploads and stray files",
    discussion: """
      Safe while `larder serve` runs on the same directory. Files no object and no model
      attachment refers to are deleted once uploaded longer ago than --grace; their content
      goes when no other file shares it. --dry-run reports the same without changing anything:
      it opens the store read-only (no crash recovery, no migration) and leaves every file
      and the catalog as they are.
      """,
    options: [dryRun, grace, json], groups: [StoreOptions.self])

  var store: StoreOptions
  var dryRun: Bool
  var grace: Duration
  var json: Bool

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    dryRun = arguments.flag(Self.dryRun)
    json = arguments.flag(Self.json)
    grace = try parseDuration(arguments.value(Self.grace)!)
    // The cutoff (now - grace) becomes a catalog timestamp; centuries are plenty and keep it in range.
    guard grace <= .seconds(36_500 * 86_400) else {
      throw UsageError("--grace must be at most 100 years (36500d)")
    }
  }

  func run() throws {
    let larder = try store.open(readOnly: dryRun)
    let terminal = isatty(STDERR_FILENO) == 1 && !json
    var options = GarbageCollector.Options(grace: grace, dryRun: dryRun)
    if terminal {
      options.progress = { p in
        FileHandle.standardError.write(Data("\rgc: \(p.phase.rawValue) \(p.processed)        ".utf8))
      }
    }
    let report = try GarbageCollector(larder: larder).collect(options: options)
    if terminal { FileHandle.standardError.write(Data("\r\u{1b}[K".utf8)) }
    if !json, let note = try BackupCommandsSupport.pinNote(larder) { print(note) }
    if json {
      print(try Output.json(report))
      return
    }
    for line in Self.lines(report) { print(line) }
  }

  /// The text report, in an operator's words (`--json` has the counters' own names).
  static func lines(_ report: GCReport) -> [String] {
    let dryRun = report.dryRun
    let grace = Self.span(report.graceSeconds)
    let verb = dryRun ? "would free" : "freed"
    let would = dryRun ? "would be " : ""
    var lines = [
      "expired uploads:   \(report.uploadsExpired) (\(Output.bytes(report.uploadBytesFreed))) \(would)deleted",
      "unused files:      \(report.filesReleased) \(would)deleted (nothing refers to them, uploaded more than \(grace) ago)",
    ]
    if report.variantsReleased > 0 {
      lines.append("  image variants:  \(report.variantsReleased) (their source is deleted)")
    }
    lines += [
      "content removed:   \(report.blobsRemoved) (\(Output.bytes(report.blobBytesFreed))) no file uses any more",
      "stray files:       \(report.strayFilesRemoved) (\(Output.bytes(report.strayBytesFreed)))",
      "temp files:        \(report.tempFilesRemoved) (\(Output.bytes(report.tempBytesFreed)))",
    ]
    if report.trashRestored + report.trashRemoved > 0 {
      lines.append(
        dryRun
          ? "interrupted gc:    \(report.trashRemoved) entries in trash/ (a real run puts them back or removes them)"
          : "interrupted gc:    \(report.trashRestored) put back, \(report.trashRemoved) removed from trash/")
    }
    if report.filesHeldByGrace > 0 {
      let files = report.filesHeldByGrace == 1 ? "1 unused file" : "\(report.filesHeldByGrace) unused files"
      lines.append(
        "kept for now:      \(files) (\(Output.bytes(report.bytesHeldByGrace))) uploaded less than \(grace) ago "
          + "(--grace); a gc after that removes them unless something refers to them by then")
    }
    lines.append(
      "\(verb) \(Output.bytes(report.bytesFreed)) in \(String(format: "%.2f", report.durationSeconds)) s\(dryRun ? " (dry run: nothing changed)" : "")"
    )
    return lines
  }

  /// A grace period as a person says it: `24 h`, `90 min`, `2 d`, `45 s`.
  static func span(_ seconds: Double) -> String {
    let s = Int64(seconds.rounded())
    for (unit, name) in [(Int64(86_400), "d"), (3600, "h"), (60, "min")] where s >= 2 * unit && s % unit == 0 {
      return "\(s / unit) \(name)"
    }
    return "\(s) s"
  }
}

struct VerifyCommand: Command {
  static let repair = Option.flag(
    "--repair", help: "quarantine corrupt blobs, fix permissions, remove strays, temp files and trash")
  static let json = Option.flag("--json", help: "print the report as JSON")
  static let deep = Option.flag(
    "--deep", help: "with --blobs s3://…, download and re-hash every blob (else: each exists with its size)")

  static let configuration = CommandConfiguration(
    name: "verify", summary: "check every stored blob and the catalog's invariants",
    discussion: """
      Re-hashes every blob and checks rows against files. Exit 0 when clean, 1 otherwise.
      With blobs in S3, checks every row's object exists with its size (a HEAD); --deep
      downloads and re-hashes them too.
      --repair quarantines corrupt blobs (downloads then answer a clear error instead of wrong
      bytes), fixes permissions and removes strays, abandoned temp files and leftover trash.
      """,
    options: [repair, json, deep], groups: [StoreOptions.self])

  var store: StoreOptions
  var repair: Bool
  var json: Bool
  var deep: Bool

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    repair = arguments.flag(Self.repair)
    json = arguments.flag(Self.json)
    deep = arguments.flag(Self.deep)
  }

  func run() throws {
    let larder = try store.open()
    let terminal = isatty(STDERR_FILENO) == 1 && !json
    var progress: (@Sendable (VerifyProgress) -> Void)?
    if terminal {
      progress = { p in
        let line =
          "\rverify: \(p.blobsChecked)/\(p.blobsTotal) blobs, \(Output.bytes(p.bytesHashed))/\(Output.bytes(p.bytesTotal))"
        FileHandle.standardError.write(Data(line.utf8))
      }
    }
    let report = try Verifier(larder: larder, deep: deep).verify(repair: repair, progress: progress)
    if terminal { FileHandle.standardError.write(Data("\r\u{1b}[K".utf8)) }
    if json {
      print(try Output.json(report))
    } else {
      for f in report.findings {
        let subject = f.sha256 ?? f.path ?? ""
        print("\(f.label)  \(f.kind.rawValue)  \(subject)  \(f.detail)")
      }
      for object in report.damagedObjects {
        let state = object.quarantined ? "quarantined" : "not quarantined yet: --repair does"
        print(
          "damaged  \(object.bucket)/\(object.name)  content \(object.sha256) (\(state)); upload the object's original bytes again to heal it"
        )
      }
      if report.damagedObjectCount > report.damagedObjects.count {
        print("damaged  … and \(report.damagedObjectCount - report.damagedObjects.count) more objects (--json lists the first)")
      }
      print(
        "checked \(report.blobsChecked) blobs (\(Output.bytes(report.bytesHashed))): \(report.findingCount) findings, \(report.unrepairedCount) unrepaired, \(report.quarantinedBlobs) quarantined"
      )
      if report.quarantinedNow > 0 {
        let blobs = report.quarantinedNow == 1 ? "1 damaged content" : "\(report.quarantinedNow) damaged contents"
        let objects = report.damagedObjectCount == 1 ? "1 object" : "\(report.damagedObjectCount) objects"
        print(
          "this run quarantined \(blobs) (\(objects) affected): their downloads answer 410 with what to do until they are uploaded again"
        )
      }
      if let note = report.reclaimableSummary { print(note) }
    }
    if !report.isClean { throw Exit(code: 1) }
  }
}
