import Foundation

extension Evaluator {
  private func arity(_ name: String, _ args: [RuleValue], _ count: Int, _ location: SourceLocation)
    throws(EvaluationError)
  {
    guard args.count == count else {
      throw fail("\(name)() takes \(count) argument\(count == 1 ? "" : "s"), got \(args.count)", location)
    }
  }

  private func int(_ v: RuleValue, _ what: String, _ location: SourceLocation) throws(EvaluationError)
    -> Int64
  {
    guard case .int(let i) = v else { throw fail("\(what) must be int, got \(v.typeName)", location) }
    return i
  }

  private func string(_ v: RuleValue, _ what: String, _ location: SourceLocation) throws(EvaluationError)
    -> String
  {
    guard case .string(let s) = v else { throw fail("\(what) must be string, got \(v.typeName)", location) }
    return s
  }

  private func list(_ v: RuleValue, _ what: String, _ location: SourceLocation) throws(EvaluationError)
    -> [RuleValue]
  {
    guard case .list(let l) = v else { throw fail("\(what) must be list, got \(v.typeName)", location) }
    return l
  }

  private func regex(_ pattern: String, _ location: SourceLocation) throws(EvaluationError) -> RE2Pattern {
    do {
      return try regexCache.pattern(pattern)
    } catch {
      throw fail("invalid regular expression: \(error.message)", location)
    }
  }

  /// `int(x)`, `float(x)`, `string(x)`, `bool(x)`.
  func globalFunction(_ name: String, _ args: [RuleValue], _ location: SourceLocation) throws(EvaluationError)
    -> RuleValue
  {
    switch name {
    case "int":
      try arity(name, args, 1, location)
      switch args[0] {
      case .int: return args[0]
      case .float(let f):
        guard f.isFinite, f > -9.223372036854775e18, f < 9.223372036854775e18 else {
          throw fail("float \(f) does not fit in int", location)
        }
        return .int(Int64(f))
      case .string(let s):
        guard let i = Int64(s.trimmingCharacters(in: .whitespaces)) else {
          throw fail("'\(s.prefix(40))' is not an int", location)
        }
        return .int(i)
      case .bool(let b): return .int(b ? 1 : 0)
      default: throw fail("cannot convert \(args[0].typeName) to int", location)
      }
    case "float":
      try arity(name, args, 1, location)
      switch args[0] {
      case .int(let i): return .float(Double(i))
      case .float: return args[0]
      case .string(let s):
        guard let f = Double(s.trimmingCharacters(in: .whitespaces)) else {
          throw fail("'\(s.prefix(40))' is not a float", location)
        }
        return .float(f)
      default: throw fail("cannot convert \(args[0].typeName) to float", location)
      }
    case "string":
      try arity(name, args, 1, location)
      return .string(try display(args[0], location))
    case "bool":
      try arity(name, args, 1, location)
      switch args[0] {
      case .bool: return args[0]
      case .string("true"): return .bool(true)
      case .string("false"): return .bool(false)
      default: throw fail("cannot convert \(args[0].typeName) to bool", location)
      }
    default:
      throw fail("unknown function '\(name)'", location)
    }
  }

  /// The `string()` form of a value.
  func display(_ v: RuleValue, _ location: SourceLocation) throws(EvaluationError) -> String {
    switch v {
    case .null: return "null"
    case .bool(let b): return b ? "true" : "false"
    case .int(let i): return String(i)
    case .float(let f): return f == f.rounded() && f.magnitude < 1e15 ? String(format: "%.1f", f) : String(f)
    case .string(let s): return s
    case .path(let p): return p.joined(separator: "/")
    case .timestamp(let t):
      let (days, nanos) = CivilTime.split(t)
      let (y, m, d) = CivilTime.civil(days: days)
      let s = nanos / 1_000_000_000
      let ms = (nanos / 1_000_000) % 1000
      return String(
        format: "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld.%03lldZ", y, m, d, s / 3600, (s / 60) % 60, s % 60,
        ms)
    case .duration(let ns):
      return "\(Double(ns) / 1e9)s"
    default:
      throw fail("cannot convert \(v.typeName) to string", location)
    }
  }

  /// `math.*`, `timestamp.*`, `duration.*`.
  func namespaceFunction(_ namespace: String, _ name: String, _ args: [RuleValue], _ location: SourceLocation)
    throws(EvaluationError) -> RuleValue
  {
    let qualified = "\(namespace).\(name)"
    switch qualified {
    case "math.abs":
      try arity(qualified, args, 1, location)
      if case .int(let i) = args[0] {
        guard i != .min else { throw fail("integer overflow", location) }
        return .int(Swift.abs(i))
      }
      return .float(Swift.abs(try number(args[0], location)))
    case "math.ceil", "math.floor", "math.round":
      try arity(qualified, args, 1, location)
      if case .int = args[0] { return args[0] }
      let f = try number(args[0], location)
      let rule: FloatingPointRoundingRule =
        name == "ceil" ? .up : name == "floor" ? .down : .toNearestOrAwayFromZero
      let rounded = f.rounded(rule)
      guard rounded.isFinite, rounded.magnitude < 9.2e18 else {
        throw fail("\(qualified) result does not fit in int", location)
      }
      return .int(Int64(rounded))
    case "math.min", "math.max":
      let values = args.count == 1 ? try list(args[0], "\(qualified) argument", location) : args
      guard var best = values.first else { throw fail("\(qualified) needs at least one value", location) }
      if values.contains(where: \.isUnknown) { return .unknown }
      for v in values.dropFirst() {
        guard let c = try compare(v, best, location) else { return .unknown }
        if (name == "min" && c < 0) || (name == "max" && c > 0) { best = v }
      }
      _ = try number(best, location)
      return best
    case "math.sqrt":
      try arity(qualified, args, 1, location)
      return .float((try number(args[0], location)).squareRoot())
    case "math.pow":
      try arity(qualified, args, 2, location)
      return .float(Foundation.pow(try number(args[0], location), try number(args[1], location)))
    case "math.isNaN":
      try arity(qualified, args, 1, location)
      return .bool((try number(args[0], location)).isNaN)
    case "math.isInfinite":
      try arity(qualified, args, 1, location)
      return .bool((try number(args[0], location)).isInfinite)
    case "timestamp.date":
      try arity(qualified, args, 3, location)
      let y = try int(args[0], "year", location)
      let m = try int(args[1], "month", location)
      let d = try int(args[2], "day", location)
      guard (1...9999).contains(y), (1...12).contains(m), (1...31).contains(d) else {
        throw fail("invalid date \(y)-\(m)-\(d)", location)
      }
      let days = CivilTime.days(year: y, month: m, day: d)
      guard CivilTime.civil(days: days) == (y, m, d) else {
        throw fail("invalid date \(y)-\(m)-\(d)", location)
      }
      return .timestamp(Date(timeIntervalSince1970: Double(days) * 86_400))
    case "timestamp.value":
      try arity(qualified, args, 1, location)
      let millis = try int(args[0], "epoch millis", location)
      // Years 1...9999, as in Firebase; beyond that Double loses the millisecond and
      // toMillis() could not give the value back.
      let first = CivilTime.days(year: 1, month: 1, day: 1) * 86_400_000
      let end = CivilTime.days(year: 10_000, month: 1, day: 1) * 86_400_000
      guard millis >= first, millis < end else { throw fail("timestamp out of range", location) }
      return .timestamp(Date(timeIntervalSince1970: Double(millis) / 1000))
    case "duration.value":
      try arity(qualified, args, 2, location)
      let magnitude = try number(args[0], location)
      let unit = try string(args[1], "duration unit", location)
      let scale: Double
      switch unit {
      case "w": scale = 604_800e9
      case "d": scale = 86_400e9
      case "h": scale = 3_600e9
      case "m": scale = 60e9
      case "s": scale = 1e9
      case "ms": scale = 1e6
      case "ns": scale = 1
      default: throw fail("unknown duration unit '\(unit)' (w, d, h, m, s, ms, ns)", location)
      }
      let ns = magnitude * scale
      guard ns.isFinite, ns.magnitude < 9.2e18 else { throw fail("duration out of range", location) }
      return .duration(nanoseconds: Int64(ns.rounded()))
    case "duration.time":
      try arity(qualified, args, 4, location)
      let parts = [
        try int(args[0], "hours", location), try int(args[1], "minutes", location),
        try int(args[2], "seconds", location), try int(args[3], "nanos", location),
      ]
      // Checked at every step: mixed signs can keep a Double estimate small while an
      // intermediate Int64 product overflows.
      var total: Int64 = 0
      for (part, scale) in zip(parts, [3_600_000_000_000, 60_000_000_000, 1_000_000_000, 1] as [Int64]) {
        let (product, productOverflow) = part.multipliedReportingOverflow(by: scale)
        let (sum, sumOverflow) = total.addingReportingOverflow(product)
        guard !productOverflow, !sumOverflow else { throw fail("duration out of range", location) }
        total = sum
      }
      return .duration(nanoseconds: total)
    case "duration.abs":
      try arity(qualified, args, 1, location)
      guard case .duration(let ns) = args[0], ns != .min else {
        throw fail("duration.abs needs a duration", location)
      }
      return .duration(nanoseconds: Swift.abs(ns))
    default:
      throw fail("unknown function '\(qualified)'", location)
    }
  }

  /// Methods on strings, lists, maps, timestamps, durations and paths.
  func method(_ target: RuleValue, _ name: String, _ args: [RuleValue], _ location: SourceLocation)
    throws(EvaluationError) -> RuleValue
  {
    switch target {
    case .string(let s): return try stringMethod(s, name, args, location)
    case .list(let items): return try listMethod(items, name, args, location)
    case .map(let m): return try mapMethod(m, name, args, location)
    case .timestamp(let t): return try timestampMethod(t, name, args, location)
    case .duration(let ns):
      try arity(name, args, 0, location)
      switch name {
      case "seconds": return .int(ns / 1_000_000_000)
      case "nanos": return .int(ns % 1_000_000_000)
      case "toMillis": return .int(ns / 1_000_000)
      default: break
      }
    case .path(let segments):
      if name == "size" {
        try arity(name, args, 0, location)
        return .int(Int64(segments.count))
      }
    case .null:
      throw fail("cannot call '\(name)()' on null", location)
    default: break
    }
    throw fail("\(target.typeName) has no method '\(name)'", location)
  }

  private func stringMethod(_ s: String, _ name: String, _ args: [RuleValue], _ location: SourceLocation)
    throws(EvaluationError) -> RuleValue
  {
    try charge(s.utf8.count / 4096, at: location)
    switch name {
    case "size":
      try arity(name, args, 0, location)
      return .int(Int64(s.unicodeScalars.count))
    case "lower":
      try arity(name, args, 0, location)
      return .string(s.lowercased())
    case "upper":
      try arity(name, args, 0, location)
      return .string(s.uppercased())
    case "trim":
      try arity(name, args, 0, location)
      return .string(s.trimmingCharacters(in: .whitespacesAndNewlines))
    case "matches":
      try arity(name, args, 1, location)
      let pattern = try string(args[0], "matches() pattern", location)
      return .bool(try regex(pattern, location).fullMatch(s))
    case "split":
      try arity(name, args, 1, location)
      let pattern = try string(args[0], "split() pattern", location)
      let bytes = Array(s.utf8)
      let ranges = try regex(pattern, location).findAll(in: bytes, limit: EvaluationLimits.maxCollectionCount)
      var parts: [RuleValue] = []
      var start = 0
      for r in ranges where !(r.isEmpty && (r.lowerBound == 0 || r.lowerBound == bytes.count)) {
        parts.append(.string(String(decoding: bytes[start..<r.lowerBound], as: UTF8.self)))
        start = r.upperBound
      }
      parts.append(.string(String(decoding: bytes[start...], as: UTF8.self)))
      try charge(parts.count / 64, at: location)
      return .list(parts)
    case "replace":
      try arity(name, args, 2, location)
      let pattern = try string(args[0], "replace() pattern", location)
      let replacement = Array(try string(args[1], "replace() replacement", location).utf8)
      let bytes = Array(s.utf8)
      let ranges = try regex(pattern, location).findAll(in: bytes, limit: EvaluationLimits.maxCollectionCount)
      guard bytes.count + ranges.count * replacement.count <= EvaluationLimits.maxStringBytes else {
        throw EvaluationError(message: "string result too large", location: location, exhausted: true)
      }
      try charge(ranges.count * replacement.count / 4096, at: location)
      var out: [UInt8] = []
      var start = 0
      for r in ranges {
        out.append(contentsOf: bytes[start..<r.lowerBound])
        out.append(contentsOf: replacement)
        start = r.upperBound
      }
      out.append(contentsOf: bytes[start...])
      return .string(String(decoding: out, as: UTF8.self))
    default:
      throw fail("string has no method '\(name)'", location)
    }
  }

  /// A hashable key for scalar values, so set operations stay linear; nil for
  /// values that need structural comparison.
  private func setKey(_ v: RuleValue) -> String? {
    switch v {
    case .null: "z"
    case .bool(let b): b ? "b1" : "b0"
    case .int(let i): "n\(i)"
    case .float(let f): f == f.rounded() && f.magnitude < 9e15 ? "n\(Int64(f))" : "f\(f)"
    // Its scalars in hex: a Set of Strings hashes by canonical equivalence, which would make
    // "K" a member of a list holding the Kelvin sign; rules compare strings byte for byte.
    case .string(let s): "s" + s.unicodeScalars.map { String($0.value, radix: 16) }.joined(separator: ".")
    default: nil
    }
  }

  /// Whether `items` contains `element`, using `keys` (when given) if the element is a scalar.
  private func member(
    of items: [RuleValue], keys: Set<String>?, _ element: RuleValue, _ location: SourceLocation
  ) throws(EvaluationError) -> Bool? {
    if let keys, let key = setKey(element) { return keys.contains(key) }
    return try contains(.list(items), element, location)
  }

  private func listMethod(
    _ items: [RuleValue], _ name: String, _ args: [RuleValue], _ location: SourceLocation
  ) throws(EvaluationError) -> RuleValue {
    switch name {
    case "size":
      try arity(name, args, 0, location)
      return .int(Int64(items.count))
    case "hasAll", "hasAny", "hasOnly":
      try arity(name, args, 1, location)
      let other = try list(args[0], "\(name)() argument", location)
      try charge((items.count + other.count) / 64, at: location)
      // hasAll/hasAny ask about `other`'s elements in `items`; hasOnly asks the reverse.
      let (haystack, needles) = name == "hasOnly" ? (other, items) : (items, other)
      // A scalar's key says nothing about an element not known yet: then every look is a scan.
      let keys = haystack.contains(where: \.isUnknown) ? nil : Set(haystack.compactMap(setKey))
      let found: Bool?
      switch name {
      case "hasAny":
        found = try some(needles) { n throws(EvaluationError) in
          try member(of: haystack, keys: keys, n, location)
        }
      default:
        found = try some(needles) { n throws(EvaluationError) in
          try member(of: haystack, keys: keys, n, location).map(!)
        }.map(!)
      }
      return found.map { .bool($0) } ?? .unknown
    case "join":
      try arity(name, args, 1, location)
      let separator = try string(args[0], "join() separator", location)
      if items.contains(where: \.isUnknown) { return .unknown }
      var parts: [String] = []
      for item in items { parts.append(try string(item, "joined element", location)) }
      try charge(items.count / 64, at: location)
      return try checkedString(parts.joined(separator: separator), location)
    case "concat":
      try arity(name, args, 1, location)
      return try binary(.add, .list(items), args[0], location)
    case "toSet":
      try arity(name, args, 0, location)
      // Which elements an unknown one duplicates is unknown, and with it the set.
      if items.contains(where: \.isUnknown) { return .unknown }
      var seen = Set<String>()
      var out: [RuleValue] = []
      for item in items {
        if let key = setKey(item) {
          if seen.insert(key).inserted { out.append(item) }
        } else {
          guard let present = try contains(.list(out), item, location) else { return .unknown }
          if !present { out.append(item) }
        }
      }
      return .list(out)
    default:
      throw fail("list has no method '\(name)'", location)
    }
  }

  private func mapMethod(
    _ m: [String: RuleValue], _ name: String, _ args: [RuleValue], _ location: SourceLocation
  ) throws(EvaluationError) -> RuleValue {
    switch name {
    case "size":
      try arity(name, args, 0, location)
      return .int(Int64(m.count))
    case "keys":
      try arity(name, args, 0, location)
      try charge(m.count / 64, at: location)
      return .list(m.keys.sorted().map { .string($0) })
    case "values":
      try arity(name, args, 0, location)
      try charge(m.count / 64, at: location)
      return .list(m.keys.sorted().map { m[$0]! })
    case "get":
      try arity(name, args, 2, location)
      let path: [RuleValue]
      if case .list(let l) = args[0] { path = l } else { path = [args[0]] }
      var current: RuleValue = .map(m)
      for key in path {
        if key.isUnknown { return .unknown }
        let k = try string(key, "get() key", location)
        guard case .map(let inner) = current, let next = inner[k] else { return args[1] }
        current = next
      }
      return current
    default:
      throw fail("map has no method '\(name)'", location)
    }
  }

  private func timestampMethod(_ t: Date, _ name: String, _ args: [RuleValue], _ location: SourceLocation)
    throws(EvaluationError) -> RuleValue
  {
    try arity(name, args, 0, location)
    let (days, nanosOfDay) = CivilTime.split(t)
    let (y, m, d) = CivilTime.civil(days: days)
    switch name {
    case "toMillis":
      guard let millis = Int64(exactly: (t.timeIntervalSince1970 * 1000).rounded(.down)) else {
        throw fail("timestamp out of range", location)
      }
      return .int(millis)
    case "year": return .int(y)
    case "month": return .int(m)
    case "day": return .int(d)
    case "hours": return .int(nanosOfDay / 3_600_000_000_000)
    case "minutes": return .int((nanosOfDay / 60_000_000_000) % 60)
    case "seconds": return .int((nanosOfDay / 1_000_000_000) % 60)
    case "nanos": return .int(nanosOfDay % 1_000_000_000)
    case "date": return .timestamp(Date(timeIntervalSince1970: Double(days) * 86_400))
    case "time": return .duration(nanoseconds: nanosOfDay)
    case "dayOfWeek":
      // 1970-01-01 was a Thursday; Firebase numbers Monday 1 ... Sunday 7.
      let weekday = ((days % 7) + 7 + 3) % 7 + 1
      return .int(weekday)
    case "dayOfYear": return .int(days - CivilTime.days(year: y, month: 1, day: 1) + 1)
    default: throw fail("timestamp has no method '\(name)'", location)
    }
  }
}
