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
  }

  /// Appends every field of `other`, in its order.
  public mutating func append(contentsOf other: HTTPHeaders) {
    fields.append(contentsOf: other.fields)
  }

  /// Replaces every field of `name` with a single one.
  public mutating func set(_ name: String, _ value: String) {
    remove(name)
    add(name, value)
  }

  public mutating func remove(_ name: String) {
    fields.removeAll { Self.same($0.name, name) }
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
