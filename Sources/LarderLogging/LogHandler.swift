/// Where log records go. A ``Logger`` value forwards every record to one handler.
///
/// Contract: `log` may be called from any thread at once, so a handler serialises its own
/// output (one line per record, never interleaved). It must not throw or block for long:
/// it runs on request threads. Metadata keys are short identifiers (`request_id`, `code`);
/// values are already rendered text.
/// ```swift
/// struct Collecting: LogHandler {
///   let lines: Mutex<[String]>
///   func log(_ record: LogRecord) { lines.withLock { $0.append(record.message) } }
/// }
/// ```
public protocol LogHandler: Sendable {
  func log(_ record: LogRecord)
}

/// One log record: what a ``Logger`` hands its handler.
public struct LogRecord: Sendable {
  public var level: Logger.Level
  public var message: String
  /// The logger's metadata merged with the call's (the call wins on a clash).
  public var metadata: [String: String]
  /// The subsystem that wrote it (`larder.http`, `larder.store`).
  public var label: String

  public init(level: Logger.Level, message: String, metadata: [String: String], label: String) {
    self.level = level
    self.message = message
    self.metadata = metadata
    self.label = label
  }

  /// `larder: warning: message key=value …`, keys sorted: the shape of every stderr line.
  public var formatted: String {
    var line = "larder: \(level.rawValue): \(message)"
    for key in metadata.keys.sorted() { line += " \(key)=\(metadata[key]!)" }
    return line
  }
}
