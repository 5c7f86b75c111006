/// Parses sizes like `5GiB`, `10MB`, `1024`.
func parseSize(_ text: String) throws(UsageError) -> Int64 {
  let units: [(String, Int64)] = [
    ("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("TiB", 1 << 40),
    ("KB", 1000), ("MB", 1_000_000), ("GB", 1_000_000_000), ("TB", 1_000_000_000_000),
    ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("B", 1),
  ]
  for (suffix, factor) in units where text.hasSuffix(suffix) {
    guard let n = Int64(text.dropLast(suffix.count)), n >= 0 else { break }
    let (product, overflow) = n.multipliedReportingOverflow(by: factor)
    guard !overflow else { throw UsageError("size '\(text)' is too large") }
    return product
  }
  guard let n = Int64(text), n >= 0 else {
    throw UsageError("'\(text)' is not a size (e.g. 1024, 10MiB, 5GiB)")
  }
  return n
}

/// Parses durations like `24h`, `30m`, `0s`, `2d`, `90`.
func parseDuration(_ text: String) throws(UsageError) -> Duration {
  let units: [(String, Int64)] = [("ms", 0), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400)]
  for (suffix, factor) in units where text.hasSuffix(suffix) {
    guard let n = Int64(text.dropLast(suffix.count)), n >= 0 else { break }
    if suffix == "ms" { return .milliseconds(n) }
    let (seconds, overflow) = n.multipliedReportingOverflow(by: factor)
    guard !overflow else { throw UsageError("duration '\(text)' is too large") }
    return .seconds(seconds)
  }
  guard let n = Int64(text), n >= 0 else {
    throw UsageError("'\(text)' is not a duration (e.g. 30s, 15m, 24h)")
  }
  return .seconds(n)
}

/// Splits `BUCKET/NAME` at the first slash.
func parseObjectPath(_ text: String) throws(UsageError) -> (bucket: String, name: String) {
  guard let slash = text.firstIndex(of: "/"), slash != text.startIndex,
    text.index(after: slash) != text.endIndex
  else {
    throw UsageError("'\(text)' is not BUCKET/NAME")
  }
  return (String(text[..<slash]), String(text[text.index(after: slash)...]))
}

/// `BUCKET[/PREFIX]` as its bucket and (possibly empty) name prefix.
func parseBucketPrefix(_ text: String) -> (bucket: String, prefix: String) {
  guard let slash = text.firstIndex(of: "/") else { return (text, "") }
  return (String(text[..<slash]), String(text[text.index(after: slash)...]))
}
