import Foundation
import Synchronization

/// A small logging value: a label, metadata (the request id…) and one ``LogHandler``.
///
/// Copy it and add metadata for a narrower scope; the copy logs through the same handler.
/// ```swift
/// var log = Logger(label: "larder.http")
/// log[metadataKey: "request_id"] = request.id
/// log.warning("access denied", metadata: ["reason": decision.reason])
/// ```
public struct Logger: Sendable {
  public enum Level: String, Sendable, Comparable, CaseIterable {
    case debug, info, notice, warning, error

    public static func < (a: Level, b: Level) -> Bool {
      allCases.firstIndex(of: a)! < allCases.firstIndex(of: b)!
    }
  }

  public var label: String
  public var handler: any LogHandler
  public var metadata: [String: String]
  /// Records below this level are dropped before they reach the handler.
  public var minimumLevel: Level

  /// A logger writing to `handler`, by default the process-wide ``Logger/defaultHandler``.
  public init(
    label: String, handler: (any LogHandler)? = nil, metadata: [String: String] = [:],
    minimumLevel: Level = .info
  ) {
    self.label = label
    self.handler = handler ?? Logger.defaultHandler
    self.metadata = metadata
    self.minimumLevel = minimumLevel
  }

  public subscript(metadataKey key: String) -> String? {
    get { metadata[key] }
    set { metadata[key] = newValue }
  }

  /// This logger with `extra` metadata added.
  public func with(_ extra: [String: String]) -> Logger {
    var copy = self
    copy.metadata.merge(extra) { _, new in new }
    return copy
  }

  public func log(
    _ level: Level, _ message: @autoclosure () -> String, metadata extra: [String: String] = [:]
  ) {
    guard level >= minimumLevel else { return }
    handler.log(
      LogRecord(
        level: level, message: message(), metadata: metadata.merging(extra) { _, new in new }, label: label))
  }

  public func debug(_ message: @autoclosure () -> String, metadata: [String: String] = [:]) {
    log(.debug, message(), metadata: metadata)
  }
  public func info(_ message: @autoclosure () -> String, metadata: [String: String] = [:]) {
    log(.info, message(), metadata: metadata)
  }
  public func warning(_ message: @autoclosure () -> String, metadata: [String: String] = [:]) {
    log(.warning, message(), metadata: metadata)
  }
  public func error(_ message: @autoclosure () -> String, metadata: [String: String] = [:]) {
    log(.error, message(), metadata: metadata)
  }

  /// The handler loggers get when none is given: standard error, unless replaced at start-up.
  public static var defaultHandler: any LogHandler {
    get { defaultHandlerStorage.withLock { $0 } }
    set { defaultHandlerStorage.withLock { $0 = newValue } }
  }
  private static let defaultHandlerStorage = Mutex<any LogHandler>(StandardErrorLogHandler())
}

/// Writes each record as one line to standard error (``LogRecord/formatted``).
public struct StandardErrorLogHandler: LogHandler {
  public init() {}
  public func log(_ record: LogRecord) {
    // One write(2) per line: concurrent records never interleave.
    FileHandle.standardError.write(Data((record.formatted + "\n").utf8))
  }
}

/// Keeps records in memory: for tests that assert what was logged.
public final class MemoryLogHandler: LogHandler {
  private let storage = Mutex<[LogRecord]>([])
  public init() {}
  public func log(_ record: LogRecord) { storage.withLock { $0.append(record) } }
  public var records: [LogRecord] { storage.withLock { $0 } }
}
