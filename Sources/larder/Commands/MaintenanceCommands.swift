import Foundation
import Larder

struct GCCommand: Command {
  static let name = "gc"
  static let summary = "collect orphaned blobs, expired uploads and stray files"
  static let usage = """
    usage: larder gc [--dry-run] [--grace 24h] [--json] [--data DIR]
      Safe while `larder serve` runs on the same directory. Files no object and no model
      attachment refers to are released once older than --grace; their bytes go when no
      other file shares them. --dry-run reports the same without changing anything.
    """
  var data: DataOptions
  var dryRun: Bool
  var grace: Duration
  var json: Bool

  init(_ arguments: inout Arguments) throws(UsageError) {
    data = try DataOptions(&arguments)
    dryRun = arguments.flag("--dry-run")
    json = arguments.flag("--json")
    grace = try arguments.option("--grace").map { text throws(UsageError) in try parseDuration(text) } ?? .seconds(86400)
    // The cutoff (now - grace) becomes a catalog timestamp; centuries are plenty and keep it in range.
    guard grace <= .seconds(36_500 * 86_400) else { throw UsageError("--grace must be at most 100 years (36500d)") }
    _ = try arguments.finish(positionals: 0...0)
  }

  func run() throws {
    let larder = try data.open()
    let terminal = isatty(STDERR_FILENO) == 1 && !json
    var options = GarbageCollector.Options(grace: grace, dryRun: dryRun)
    if terminal {
      options.progress = { p in
        FileHandle.standardError.write(Data("\rgc: \(p.phase.rawValue) \(p.processed)        ".utf8))
      }
    }
    let report = try GarbageCollector(larder: larder).collect(options: options)
    if terminal { FileHandle.standardError.write(Data("\r\u{1b}[K".utf8)) }
    if json {
      print(try Output.json(report))
      return
    }
    let verb = dryRun ? "would free" : "freed"
    print("uploads expired:   \(report.uploadsExpired) (\(Output.bytes(report.uploadBytesFreed)))")
    print("files released:    \(report.filesReleased)")
    print("blobs removed:     \(report.blobsRemoved) (\(Output.bytes(report.blobBytesFreed)))")
    print("stray files:       \(report.strayFilesRemoved) (\(Output.bytes(report.strayBytesFreed)))")
    print("temp files:        \(report.tempFilesRemoved) (\(Output.bytes(report.tempBytesFreed)))")
    if report.trashRestored + report.trashRemoved > 0 {
      print("trash recovered:   \(report.trashRestored) restored, \(report.trashRemoved) removed")
    }
    print("\(verb) \(Output.bytes(report.bytesFreed)) in \(String(format: "%.2f", report.durationSeconds)) s\(dryRun ? " (dry run: nothing changed)" : "")")
  }
}

struct VerifyCommand: Command {
  static let name = "verify"
  static let summary = "check every stored blob and the catalog's invariants"
  static let usage = """
    usage: larder verify [--repair] [--json] [--data DIR]
      Re-hashes every blob and checks rows against files. Exit 0 when clean, 1 otherwise.
      --repair quarantines corrupt blobs (downloads then answer a clear error instead of wrong
      bytes), fixes permissions and removes strays, abandoned temp files and leftover trash.
    """
  var data: DataOptions
  var repair: Bool
  var json: Bool

  init(_ arguments: inout Arguments) throws(UsageError) {
    data = try DataOptions(&arguments)
    repair = arguments.flag("--repair")
    json = arguments.flag("--json")
    _ = try arguments.finish(positionals: 0...0)
  }

  func run() throws {
    let larder = try data.open()
    let terminal = isatty(STDERR_FILENO) == 1 && !json
    var progress: (@Sendable (VerifyProgress) -> Void)?
    if terminal {
      progress = { p in
        let line = "\rverify: \(p.blobsChecked)/\(p.blobsTotal) blobs, \(Output.bytes(p.bytesHashed))/\(Output.bytes(p.bytesTotal))"
        FileHandle.standardError.write(Data(line.utf8))
      }
    }
    let report = try Verifier(larder: larder).verify(repair: repair, progress: progress)
    if terminal { FileHandle.standardError.write(Data("\r\u{1b}[K".utf8)) }
    if json {
      print(try Output.json(report))
    } else {
      for f in report.findings {
        let subject = f.sha256 ?? f.path ?? ""
        print("\(f.repaired ? "repaired" : "FAULT")  \(f.kind.rawValue)  \(subject)  \(f.detail)")
      }
      print(
        "checked \(report.blobsChecked) blobs (\(Output.bytes(report.bytesHashed))): \(report.findingCount) findings, \(report.unrepairedCount) unrepaired, \(report.quarantinedBlobs) quarantined"
      )
    }
    if !report.isClean { throw Exit(code: 1) }
  }
}

/// Ends the process with a status, without an error line (the report said it all).
struct Exit: Error {
  let code: Int32
}
