import Foundation
import Synchronization

/// A one-line progress bar on stderr, drawn only when stderr is a terminal.
///
/// Sendable: a remote upload reports its chunks from the task that sends them.
final class ProgressBar: Sendable {
  /// What `total` counts: bytes (drawn from 8 MiB up, a smaller copy is over at once), or items.
  enum Unit { case bytes, items }

  private let total: Int64
  private let label: String
  private let unit: Unit
  private let enabled: Bool
  private let lastDraw = Mutex(Date.distantPast)

  init(total: Int64, label: String, unit: Unit = .bytes) {
    self.total = total
    self.label = label
    self.unit = unit
    enabled = isatty(STDERR_FILENO) == 1 && (unit == .items ? total > 0 : total >= 8 << 20)
  }

  func update(_ done: Int64) {
    guard enabled else { return }
    let due = lastDraw.withLock { last in
      guard Date().timeIntervalSince(last) > 0.1 || done == total else { return false }
      last = Date()
      return true
    }
    guard due else { return }
    let fraction = total > 0 ? Double(done) / Double(total) : 1
    let width = 30
    let filled = Int(fraction * Double(width))
    let bar = String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled)
    let count = unit == .bytes ? Output.bytes(done) : "\(done)/\(total)"
    let line = String(format: "\r%@ [%@] %3.0f%% %@", label, bar, fraction * 100, count)
    FileHandle.standardError.write(Data(line.utf8))
  }

  func finish() {
    if enabled { FileHandle.standardError.write(Data("\n".utf8)) }
  }
}
