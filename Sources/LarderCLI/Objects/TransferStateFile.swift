import Foundation
import LarderCrypto

/// What lets an interrupted transfer with `--server` continue when the same command runs
/// again: a small JSON file (mode 600) under `$XDG_STATE_HOME/larder/KIND/` (default
/// `~/.local/state/larder/…`), named by a hash of what identifies the transfer, removed when it
/// completes.
///
/// - `uploads/`: the resumable session's URI, keyed by the server, the destination and the
///   source's path, size and modification time (a changed file starts over).
/// - `downloads/`: the generation the `.larder-partial` file beside the output holds, keyed by
///   the server, the object and the output's path (another generation starts over).
struct TransferStateFile<Contents: Codable> {
  let path: String

  /// The directory of `kind`'s files, from the environment.
  static func directory(_ kind: String, _ environment: [String: String] = ProcessInfo.processInfo.environment)
    -> String
  {
    if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return "\(state)/larder/\(kind)" }
    let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
    return "\(home)/.local/state/larder/\(kind)"
  }

  init(kind: String, key: [String]) {
    let digest = Digest.hash(.sha256, Array(key.joined(separator: "\n").utf8))
    path = Self.directory(kind) + "/" + Hex.encode(digest) + ".json"
  }

  /// The remembered state, if any (an unreadable file counts as none).
  func load() -> Contents? {
    guard let data = FileManager.default.contents(atPath: path) else { return nil }
    return try? JSONDecoder().decode(Contents.self, from: data)
  }

  /// Records `contents`; failing only loses the ability to resume, so it is a note.
  func save(_ contents: Contents) {
    do {
      try FileManager.default.createDirectory(
        atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true,
        attributes: [.posixPermissions: 0o700])
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
      let temp = path + ".tmp"
      guard
        FileManager.default.createFile(
          atPath: temp, contents: try encoder.encode(contents), attributes: [.posixPermissions: 0o600])
      else { throw CommandFailure("cannot create \(temp)") }
      guard rename(temp, path) == 0 else { throw CommandFailure(errnoText) }
    } catch {
      Output.note(
        "larder: note: cannot remember the transfer in \(path) (\(error)); an interruption restarts it")
    }
  }

  func remove() { unlink(path) }
}

/// An upload's resumable session.
struct UploadSession: Codable {
  var session: String
  var server: String
  var destination: String
  var source: String
  var size: Int64
}

/// What a download's partial file holds.
struct PartialDownload: Codable {
  var server: String
  var object: String
  var generation: Int64
  var output: String
}
