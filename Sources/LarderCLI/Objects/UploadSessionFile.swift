import Foundation
import LarderCrypto

/// Where an interrupted resumable upload is remembered so that running the same `put` again
/// continues it: a small JSON file (mode 600) holding the session URI, named by a hash of the
/// server, the destination, and the source's path, size and modification time (a changed file
/// starts over). It lives in `$XDG_STATE_HOME/larder/uploads` (default `~/.local/state/…`) and
/// is removed when the upload completes.
///
/// ```
/// {"destination": "app/videos/v1.mp4", "server": "http://…", "session": "http://…&upload_id=…",
///  "source": "/home/me/v1.mp4", "size": 209715200}
/// ```
struct UploadSessionFile {
  let path: String

  struct Contents: Codable {
    var session: String
    var server: String
    var destination: String
    var source: String
    var size: Int64
  }

  /// The directory of session files, from the environment.
  static func directory(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
    if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/larder/uploads" }
    let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
    return home + "/.local/state/larder/uploads"
  }

  init(server: String, bucket: String, name: String, source: String, size: Int64, modified: timespec) {
    let key = [server, bucket, name, source, String(size), "\(modified.tv_sec).\(modified.tv_nsec)"]
      .joined(separator: "\n")
    path = Self.directory() + "/" + Hex.encode(Digest.hash(.sha256, Array(key.utf8))) + ".json"
  }

  /// The remembered session, if any (an unreadable file counts as none).
  func load() -> Contents? {
    guard let data = FileManager.default.contents(atPath: path) else { return nil }
    return try? JSONDecoder().decode(Contents.self, from: data)
  }

  /// Records `contents`; a failure to write only loses the ability to resume, so it is a note.
  func save(_ contents: Contents) {
    do {
      try FileManager.default.createDirectory(
        atPath: (path as NSString).deletingLastPathComponent, withIntermediateDirectories: true,
        attributes: [.posixPermissions: 0o700])
      let encoder = JSONEncoder()
      encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
      let temp = path + ".tmp"
      guard FileManager.default.createFile(
        atPath: temp, contents: try encoder.encode(contents), attributes: [.posixPermissions: 0o600])
      else { throw CommandFailure("cannot create \(temp)") }
      guard rename(temp, path) == 0 else { throw CommandFailure(String(cString: strerror(errno))) }
    } catch {
      Output.note("larder: note: cannot remember the upload session in \(path) (\(error)); an interruption restarts it")
    }
  }

  func remove() { unlink(path) }
}
