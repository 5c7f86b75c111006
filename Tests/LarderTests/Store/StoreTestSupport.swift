import Foundation
import LarderTestSupport
import Larder
import LarderCrypto
import Testing

/// A fresh directory under the system temp directory, removed with everything in it when released.
///
/// Tests that reopen a store need a directory that outlives one `Larder` (``Larder/temporary()``
/// removes its own on release).
final class StoreScratch: Sendable {
  let url: URL
  var path: String { url.path }

  init() throws {
    url = FileManager.default.temporaryDirectory.appendingPathComponent("larder-store-tests-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
  }

  deinit { try? FileManager.default.removeItem(at: url) }

  /// Writes `bytes` to a new file in this directory and returns its URL.
  func file(_ name: String, _ bytes: [UInt8]) throws -> URL {
    let target = url.appendingPathComponent(name)
    try Data(bytes).write(to: target)
    return target
  }
}

/// SplitMix64: a fast, deterministic byte stream, the same on every run and machine.
struct PseudoRandomBytes {
  private var state: UInt64

  init(seed: UInt64) { state = seed }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  /// Fills `buffer`; the stream continues across calls when each length is a multiple of 8.
  mutating func fill(_ buffer: UnsafeMutableRawBufferPointer) {
    var offset = 0
    while offset + 8 <= buffer.count {
      buffer.storeBytes(of: next().littleEndian, toByteOffset: offset, as: UInt64.self)
      offset += 8
    }
    if offset < buffer.count {
      var last = next().littleEndian
      withUnsafeBytes(of: &last) { word in
        for i in offset..<buffer.count { buffer[i] = word[i - offset] }
      }
    }
  }

  mutating func bytes(_ count: Int) -> [UInt8] {
    var out = [UInt8](repeating: 0, count: count)
    out.withUnsafeMutableBytes { fill($0) }
    return out
  }
}

extension Larder {
  /// Rows in a catalog table, read through the store's own reader connections.
  func storeRowCount(_ table: String) throws -> Int64 {
    try catalog.read { db in try db.row("SELECT count(*) AS n FROM \(table)")?.int("n") } ?? -1
  }

  /// The counts of the tables a write touches, in one snapshot: blobs, files, objects.
  func storeCounts() throws -> [Int64] {
    try catalog.read { db in
      try ["blobs", "files", "objects"].map { try db.row("SELECT count(*) AS n FROM \($0)")?.int("n") ?? -1 }
    }
  }

  /// Paths of every regular file under `blobs/`, relative to the data directory, sorted.
  func storeBlobFiles() -> [String] {
    regularFiles(under: directory.appendingPathComponent("blobs"))
  }

  /// Names in `tmp/`.
  func storeTempFiles() -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: blobs.tmpDirectory.path)) ?? []).sorted()
  }

  /// Names in `trash/`.
  func storeTrashFiles() -> [String] {
    ((try? FileManager.default.contentsOfDirectory(atPath: blobs.trashDirectory.path)) ?? []).sorted()
  }

  private func regularFiles(under root: URL) -> [String] {
    var out: [String] = []
    guard let walker = FileManager.default.enumerator(atPath: root.path) else { return [] }
    while let relative = walker.nextObject() as? String {
      var st = stat()
      if lstat(root.appendingPathComponent(relative).path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG {
        out.append("blobs/" + relative)
      }
    }
    return out.sorted()
  }
}

/// Lower-case hex SHA-256 of `bytes`.
func sha256Hex<Bytes: Sequence>(_ bytes: Bytes) -> String where Bytes.Element == UInt8 {
  Hex.encode(Digest.hash(.sha256, bytes))
}

/// Runs a program to completion and returns its standard output; fails the test on a non-zero exit.
func runTool(_ executable: String, _ arguments: [String]) throws -> Data {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: executable)
  process.arguments = arguments
  let output = Pipe()
  process.standardOutput = output
  process.standardError = FileHandle.nullDevice
  try process.run()
  let data = output.fileHandleForReading.readDataToEndOfFile()
  process.waitUntilExit()
  #expect(process.terminationStatus == 0, "\(executable) \(arguments) exited with \(process.terminationStatus)")
  return data
}

/// An error a test injects through ``FaultInjector``.
struct InjectedFailure: Error, Equatable {}

/// The stable code of a thrown error, or a description of what else was thrown.
func errorCode(of error: (any Error)?) -> String {
  guard let error else { return "no error" }
  return (error as? LarderError)?.code ?? "not a LarderError: \(error)"
}
