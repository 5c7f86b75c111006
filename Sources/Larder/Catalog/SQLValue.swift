import Foundation

/// A value stored in or read from an SQLite column.
package enum SQLValue: Sendable, Equatable {
  case null
  case integer(Int64)
  case real(Double)
  case text(String)
  case blob([UInt8])
}

/// Types that bind to a statement parameter.
package protocol SQLBindable: Sendable {
  var sqlValue: SQLValue { get }
}

extension Int: SQLBindable { package var sqlValue: SQLValue { .integer(Int64(self)) } }
extension Int64: SQLBindable { package var sqlValue: SQLValue { .integer(self) } }
extension Double: SQLBindable { package var sqlValue: SQLValue { .real(self) } }
extension String: SQLBindable { package var sqlValue: SQLValue { .text(self) } }
extension Bool: SQLBindable { package var sqlValue: SQLValue { .integer(self ? 1 : 0) } }
extension SQLValue: SQLBindable { package var sqlValue: SQLValue { self } }
extension Array: SQLBindable where Element == UInt8 { package var sqlValue: SQLValue { .blob(self) } }
extension Optional: SQLBindable where Wrapped: SQLBindable {
  package var sqlValue: SQLValue { self?.sqlValue ?? .null }
}
extension Date: SQLBindable {
  /// Dates are stored as integer milliseconds since 1970.
  /// Dates beyond what 64-bit milliseconds hold (distant past/future) clamp rather than trap.
  package var sqlValue: SQLValue {
    let ms = (timeIntervalSince1970 * 1000).rounded()
    return .integer(ms.isNaN ? 0 : ms >= 9.2e18 ? .max : ms <= -9.2e18 ? .min : Int64(ms))
  }
}

/// The column names of a statement's results, with a lookup table made once per statement.
package final class RowLayout: Sendable {
  package let columns: [String]
  let index: [String: Int]

  package init(columns: [String]) {
    self.columns = columns
    // The first of two equal names wins, as in SQL's own name resolution order.
    index = Dictionary(columns.enumerated().map { ($1, $0) }, uniquingKeysWith: { first, _ in first })
  }
}

/// One result row, read by column index or name.
package struct Row: Sendable {
  package let layout: RowLayout
  package let values: [SQLValue]

  package var columns: [String] { layout.columns }

  package init(layout: RowLayout, values: [SQLValue]) {
    self.layout = layout
    self.values = values
  }

  package subscript(_ index: Int) -> SQLValue { values[index] }

  package subscript(_ name: String) -> SQLValue {
    guard let i = layout.index[name] else { return .null }
    return values[i]
  }

  package func int(_ name: String) -> Int64? {
    if case .integer(let v) = self[name] { return v }
    return nil
  }

  package func double(_ name: String) -> Double? {
    switch self[name] {
    case .real(let v): v
    case .integer(let v): Double(v)
    default: nil
    }
  }

  package func string(_ name: String) -> String? {
    if case .text(let v) = self[name] { return v }
    return nil
  }

  package func bytes(_ name: String) -> [UInt8]? {
    switch self[name] {
    case .blob(let v): v
    case .text(let v): Array(v.utf8)
    default: nil
    }
  }

  package func date(_ name: String) -> Date? {
    int(name).map { Date(timeIntervalSince1970: Double($0) / 1000) }
  }
}

extension Date {
  /// Now, truncated to the millisecond the catalog stores, so a value returned by a write
  /// equals the one read back later.
  static var nowInMilliseconds: Date {
    Date(timeIntervalSince1970: (Date().timeIntervalSince1970 * 1000).rounded(.down) / 1000)
  }
}
