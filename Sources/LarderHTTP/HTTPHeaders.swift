/// An ordered list of HTTP header fields with case-insensitive lookup.
///
/// Order and repetition are kept because some fields legitimately repeat (`Set-Cookie`,
/// `Link`) and because the access layer must hand back exactly what the client sent.
/// ```swift
/// var h: HTTPHeaders = ["Content-Type": "application/json"]
/// h.add("Vary", "Origin")
/// h["content-type"]   // "application/json"
/// ```
public struct HTTPHeaders: Sendable, Sequence, ExpressibleByDictionaryLiteral, Equatable {
  public struct Field: Sendable, Equatable {
    public var name: String
    public var value: String
    public init(name: String, value: String) {
      self.name = name
      self.value = value
    }
  }

  public private(set) var fields: [Field]
  /// The fields as they go on the wire (`Name: value\r\n` each), once ``sealed()`` worked it out,
  /// kept up to date by later changes where that is cheap, nil otherwise. A set answered many
  /// times (a download's, cached with its row) is then written with one copy, not four appends
  /// and a check per field. Not part of equality.
  private(set) var wire: [UInt8]?

  public init() { fields = [] }

  /// Empty, with room for `capacity` fields (a response built field by field grows once).
  public init(capacity: Int) {
    fields = []
    fields.reserveCapacity(capacity)
  }

  public init(_ pairs: [(String, String)]) {
    fields = pairs.map { Field(name: $0.0, value: $0.1) }
  }

  public init(dictionaryLiteral elements: (String, String)...) {
    self.init(elements)
  }

  /// The first value of `name`, compared case-insensitively; `nil` when absent.
  public subscript(name: String) -> String? {
    fields.first { Self.same($0.name, name) }?.value
  }

  /// Every value of `name`, in the order received.
  public func values(for name: String) -> [String] {
    fields.filter { Self.same($0.name, name) }.map(\.value)
  }

  public func contains(_ name: String) -> Bool {
    fields.contains { Self.same($0.name, name) }
  }

  /// Appends a field, keeping any existing ones of the same name.
  public mutating func add(_ name: String, _ value: String) {
    fields.append(Field(name: name, value: value))
    if wire != nil, !Self.appendWire(name, value, to: &wire!) { wire = nil }
  }

  /// Appends every field of `other`, in its order.
  public mutating func append(contentsOf other: HTTPHeaders) {
    let sealed = (wire ?? (fields.isEmpty ? [] : nil), other.wire ?? (other.fields.isEmpty ? [] : nil))
    fields.append(contentsOf: other.fields)
    if case (let mine?, let theirs?) = sealed { wire = mine + theirs } else { wire = nil }
  }

  /// These fields with their wire form worked out now (``wire``), for a set that is answered
  /// many times. A field the engine writes itself (`Content-Length`, `Connection`) or one that
  /// holds a CR or LF leaves the set unsealed: the engine then skips or drops it, as it does in
  /// every unsealed set.
  public func sealed() -> HTTPHeaders {
    var bytes: [UInt8] = []
    for field in fields {
      guard Self.appendWire(field.name, field.value, to: &bytes) else { return self }
    }
    var copy = self
    copy.wire = bytes
    return copy
  }

  /// Appends `name: value\r\n`; false (and `bytes` unchanged) for a field that may not be
  /// written as it is: one of the engine's own, or one with a line break inside.
  private static func appendWire(_ name: String, _ value: String, to bytes: inout [UInt8]) -> Bool {
    guard !same(name, "Content-Length"), !same(name, "Connection") else { return false }
    let start = bytes.count
    bytes.append(contentsOf: name.utf8)
    bytes.append(contentsOf: ": ".utf8)
    bytes.append(contentsOf: value.utf8)
    guard !bytes.withUnsafeBytes({ containsLineBreak(UnsafeRawBufferPointer(rebasing: $0[start...])) }) else {
      bytes.removeSubrange(start...)
      return false
    }
    bytes.append(contentsOf: "\r\n".utf8)
    return true
  }

  /// Whether `bytes` hold a CR or an LF, eight bytes at a time (every answer's fields are checked).
  static func containsLineBreak(_ bytes: UnsafeRawBufferPointer) -> Bool {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    func hasZeroByte(_ v: UInt64) -> Bool { (v &- ones) & ~v & highs != 0 }
    var i = 0
    while i + 8 <= bytes.count {
      let word = bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)
      if hasZeroByte(word ^ (ones &* 13)) || hasZeroByte(word ^ (ones &* 10)) { return true }
      i += 8
    }
    return bytes[i...].contains { $0 == 13 || $0 == 10 }
  }

  public static func == (a: HTTPHeaders, b: HTTPHeaders) -> Bool { a.fields == b.fields }

  /// Replaces every field of `name` with a single one.
  public mutating func set(_ name: String, _ value: String) {
    remove(name)
    add(name, value)
  }

  public mutating func remove(_ name: String) {
    let before = fields.count
    fields.removeAll { Self.same($0.name, name) }
    if fields.count != before { wire = nil }
  }

  public var count: Int { fields.count }

  public func makeIterator() -> IndexingIterator<[Field]> { fields.makeIterator() }

  /// ASCII case-insensitive comparison: header names are tokens, so no Unicode folding.
  static func same(_ a: String, _ b: String) -> Bool {
    let x = a.utf8
    let y = b.utf8
    guard x.count == y.count else { return false }
    for (p, q) in zip(x, y) where p != q {
      let lp = (p >= 0x41 && p <= 0x5A) ? p | 0x20 : p
      let lq = (q >= 0x41 && q <= 0x5A) ? q | 0x20 : q
      if lp != lq { return false }
    }
    return true
  }
}
