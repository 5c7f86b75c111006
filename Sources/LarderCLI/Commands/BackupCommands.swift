import Foundation
import Larder
import LarderS3Store

/// The destination positional every backup command takes.
private let destinationArgument = Positional(
  "DEST", help: "the backup destination: a directory, or s3://BUCKET?endpoint=URL&prefix=P")
private let snapshotOption = Option.value(
  "--snapshot", "ID", help: "one snapshot (default: the newest; verify: all)")

/// A progress line on stderr when it is a terminal, redrawn at most ten times a second.
private func progressLine(_ label: String) -> (@Sendable (BackupProgress) -> Void)? {
  guard isatty(STDERR_FILENO) == 1 else { return nil }
  let last = LockedClock()
  return { p in
    guard p.blobsDone == p.blobsTotal || last.due() else { return }
    let line =
      "\r\(label): \(p.blobsDone)/\(p.blobsTotal) blobs, \(Output.bytes(p.bytesDone))/\(Output.bytes(p.bytesTotal))\u{1b}[K"
    FileHandle.standardError.write(Data(line.utf8))
  }
}

private func endProgressLine() {
  if isatty(STDERR_FILENO) == 1 { FileHandle.standardError.write(Data("\r\u{1b}[K".utf8)) }
}

private final class LockedClock: @unchecked Sendable {
  private let lock = NSLock()
  private var last = Date.distantPast
  func due() -> Bool {
    lock.withLock {
      guard Date().timeIntervalSince(last) > 0.1 else { return false }
      last = Date()
      return true
    }
  }
}

struct BackupCommand: Command {
  static let force = Option.flag(
    "--force", help: "back up into a destination that holds another store's backups")

  static let configuration = CommandConfiguration(
    name: "backup", summary: "take a consistent, incremental snapshot of the store into a directory or S3",
    discussion: """
      Safe while `larder serve` and `larder gc` run: the catalog is snapshotted at one instant
      and pinned, so gc removes no blob until the copy is done. Only blobs not already in DEST
      are copied; the snapshot is listed (larder backup list) only once complete. An s3://
      DEST takes its credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY.
      """,
    positionals: [destinationArgument], options: [force], groups: [StoreOptions.self])

  var store: StoreOptions
  var destination: any BackupDestination
  var force: Bool

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    destination = try BackupCommandsSupport.destination(arguments.required(destinationArgument))
    force = arguments.flag(Self.force)
  }

  func run() throws {
    let larder = try store.open()
    let started = ContinuousClock.now
    let manifest = try Backup(
      larder: larder, destination: destination, force: force, progress: progressLine("backup")
    )
    .run()
    endProgressLine()
    let elapsed = (ContinuousClock.now - started).components
    let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) / 1e18
    print(
      "snapshot \(manifest.id): \(manifest.objects) objects, \(manifest.blobs) blobs (\(Output.bytes(manifest.bytes))); "
        + "copied \(manifest.copiedBlobs) blobs (\(Output.bytes(manifest.copiedBytes))) in \(String(format: "%.2f", seconds)) s"
    )
  }
}

enum BackupCommandsSupport {
  /// What `gc` says when a backup's pin keeps it from removing blobs (nil when none is live).
  static func pinNote(_ larder: Larder) throws -> String? {
    let pins = try SnapshotPins(catalog: larder.catalog).live()
    guard !pins.isEmpty else { return nil }
    return "blobs kept:        a backup is copying (snapshot \(pins.joined(separator: ", "))): "
      + "no blob is removed until it ends"
  }

  /// A directory, or a bucket prefix for an `s3://` URL (the same URL and client as `--blobs`).
  static func destination(_ path: String) throws(UsageError) -> any BackupDestination {
    guard path.hasPrefix("s3://") else { return DirectoryDestination(path) }
    do {
      return try S3BackupDestination(url: path)
    } catch {
      throw UsageError("DEST: \(error)")
    }
  }
}

struct BackupListCommand: Command {
  static let json = Option.flag("--json", help: "print the manifests as JSON")

  static let configuration = CommandConfiguration(
    name: "backup list", summary: "list the complete snapshots in a backup destination",
    positionals: [destinationArgument], options: [json])

  var destination: any BackupDestination
  var json: Bool

  init(_ arguments: ParsedArguments) throws(UsageError) {
    destination = try BackupCommandsSupport.destination(arguments.required(destinationArgument))
    json = arguments.flag(Self.json)
  }

  func run() throws {
    let snapshots = try destination.snapshots()
    if json {
      print(try Output.json(snapshots))
      return
    }
    for m in snapshots {
      print(
        "\(m.id)  \(m.createdAt.ISO8601Format())  \(m.objects) objects  \(m.blobs) blobs  \(Output.bytes(m.bytes))"
      )
    }
  }
}

struct BackupVerifyCommand: Command {
  static let deep = Option.flag("--deep", help: "re-hash every blob (else: each is present with its size)")
  static let json = Option.flag("--json", help: "print the damage as JSON")

  static let configuration = CommandConfiguration(
    name: "backup verify", summary: "check snapshots in a backup destination",
    discussion: """
      Checks each snapshot's catalog against its manifest's checksum and every blob it
      references. Damage is named by snapshot and object. Exit 0 when clean, 1 otherwise.
      """,
    positionals: [destinationArgument], options: [snapshotOption, deep, json])

  var destination: any BackupDestination
  var snapshot: String?
  var deep: Bool
  var json: Bool

  init(_ arguments: ParsedArguments) throws(UsageError) {
    destination = try BackupCommandsSupport.destination(arguments.required(destinationArgument))
    snapshot = arguments.value(snapshotOption)
    deep = arguments.flag(Self.deep)
    json = arguments.flag(Self.json)
  }

  func run() throws {
    let (checked, damage) = try BackupVerifier(
      destination: destination, deep: deep, progress: progressLine("verify")
    )
    .verify(snapshot: snapshot)
    endProgressLine()
    if json {
      print(try Output.json(damage))
    } else {
      for d in damage {
        let names = d.references.isEmpty ? "" : "  (\(d.references.joined(separator: ", ")))"
        print("\(d.snapshot)  \(d.sha256 ?? "catalog")  \(d.detail)\(names)")
      }
      print("checked \(checked.count) snapshots\(deep ? " deeply" : ""): \(damage.count) damaged")
    }
    if !damage.isEmpty { throw Exit(code: 1) }
  }
}

struct BackupPruneCommand: Command {
  static let keep = Option.value(
    "--keep", "N", required: true, help: "how many of the newest snapshots to keep")

  static let configuration = CommandConfiguration(
    name: "backup prune", summary: "remove old snapshots and the blobs no kept snapshot references",
    positionals: [destinationArgument], options: [keep])

  var destination: any BackupDestination
  var keep: Int

  init(_ arguments: ParsedArguments) throws(UsageError) {
    destination = try BackupCommandsSupport.destination(arguments.required(destinationArgument))
    guard let n = Int(arguments.value(Self.keep) ?? ""), n >= 1 else {
      throw UsageError("--keep must be a whole number of at least 1")
    }
    keep = n
  }

  func run() throws {
    let (snapshots, blobs, bytes) = try BackupPruner(destination: destination).prune(keep: keep)
    print("removed \(snapshots.count) snapshots and \(blobs) blobs (\(Output.bytes(bytes)))")
  }
}

struct RestoreCommand: Command {
  static let configuration = CommandConfiguration(
    name: "restore", summary: "restore a backup snapshot into an empty store",
    discussion: """
      Restores into an empty data directory, and into an empty PostgreSQL catalog (--catalog)
      and an empty S3 prefix (--blobs) when given; refuses a target that holds anything.
      Checks the snapshot before writing, re-hashes every blob it copies, and writes the
      catalog last.
      """,
    positionals: [destinationArgument], options: [snapshotOption], groups: [StoreOptions.self])

  var store: StoreOptions
  var destination: any BackupDestination
  var snapshot: String?

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    destination = try BackupCommandsSupport.destination(arguments.required(destinationArgument))
    snapshot = arguments.value(snapshotOption)
  }

  func run() throws {
    let manifest = try Restore(
      destination: destination, snapshot: snapshot, directory: store.data.directory, catalog: store.catalog,
      blobs: store.blobs, backends: StoreOptions.backends, progress: progressLine("restore")
    ).run()
    endProgressLine()
    // Opening checks the identity and brings the schema up to date.
    _ = try store.open()
    print(
      "restored snapshot \(manifest.id) of store \(manifest.storeID): \(manifest.objects) objects, \(manifest.blobs) blobs (\(Output.bytes(manifest.bytes)))"
    )
  }
}
