import Foundation

/// A fetch of one model type: filters on fields of its JSON body, a sort, a window.
///
/// ```swift
/// let adults = try larder.models.query(
///   Query(User.self)
///     .filter(Field("age") >= 18 && Field("name").hasPrefix("A"))
///     .sorted(by: "age", .descending)
///     .limit(20).offset(40))
/// ```
/// Several `filter`s combine with AND. Results are ordered by the sort keys, then by `id`, so
/// the order is total and pages are stable.
public struct Query<T: Model>: Sendable {
  public private(set) var predicates: [ModelPredicate] = []
  public private(set) var sortKeys: [SortKey] = []
  public private(set) var fetchLimit: Int?
  public private(set) var fetchOffset: Int = 0

  public init(_ type: T.Type = T.self) {}

  /// Keeps only models matching `predicate` (AND with earlier filters).
  public func filter(_ predicate: ModelPredicate) -> Query {
    var copy = self
    copy.predicates.append(predicate)
    return copy
  }

  /// Adds a sort key after the earlier ones.
  public func sorted(by field: String, _ order: SortOrder = .ascending) -> Query {
    var copy = self
    copy.sortKeys.append(SortKey(field: field, order: order))
    return copy
  }

  /// At most `count` models.
  public func limit(_ count: Int) -> Query {
    var copy = self
    copy.fetchLimit = count
    return copy
  }

  /// Skips the first `count` models.
  public func offset(_ count: Int) -> Query {
    var copy = self
    copy.fetchOffset = count
    return copy
  }
}

public enum SortOrder: Sendable, Hashable {
  case ascending
  case descending
}

public struct SortKey: Sendable, Hashable {
  public let field: String
  public let order: SortOrder
  public init(field: String, order: SortOrder = .ascending) {
    self.field = field
    self.order = order
  }
}

/// A field of a model's JSON body, named by its coding keys: `"age"`, `"profile.city"`, `"tags[0]"`.
///
/// Comparisons follow SQLite's: a missing or `null` field matches no `<`, `<=`, `>`, `>=`, `==`,
/// `in`, prefix or contains test, but does match `!=` (it is not equal to the value).
/// Numbers sort before strings. String tests are case-sensitive.
public struct Field: Sendable {
  public let path: String
  public init(_ path: String) { self.path = path }

  public func isIn<V: QueryValueConvertible>(_ values: [V]) -> ModelPredicate {
    .isIn(path, values.map(\.queryValue))
  }
  public func hasPrefix(_ prefix: String) -> ModelPredicate { .hasPrefix(path, prefix) }
  public func contains(_ text: String) -> ModelPredicate { .contains(path, text) }
  /// The field is missing or `null` (an optional that was `nil`).
  public var isNil: ModelPredicate { .isNil(path) }
  public var isNotNil: ModelPredicate { .isNotNil(path) }

  public static func == <V: QueryValueConvertible>(lhs: Field, rhs: V) -> ModelPredicate {
    .compare(lhs.path, .equal, rhs.queryValue)
  }
  public static func != <V: QueryValueConvertible>(lhs: Field, rhs: V) -> ModelPredicate {
    .compare(lhs.path, .notEqual, rhs.queryValue)
  }
  public static func < <V: QueryValueConvertible>(lhs: Field, rhs: V) -> ModelPredicate {
    .compare(lhs.path, .less, rhs.queryValue)
  }
  public static func <= <V: QueryValueConvertible>(lhs: Field, rhs: V) -> ModelPredicate {
    .compare(lhs.path, .lessOrEqual, rhs.queryValue)
  }
  public static func > <V: QueryValueConvertible>(lhs: Field, rhs: V) -> ModelPredicate {
    .compare(lhs.path, .greater, rhs.queryValue)
  }
  public static func >= <V: QueryValueConvertible>(lhs: Field, rhs: V) -> ModelPredicate {
    .compare(lhs.path, .greaterOrEqual, rhs.queryValue)
  }
}

/// A filter over model fields; build it from ``Field`` and combine with `&&`, `||`, `!`.
public indirect enum ModelPredicate: Sendable {
  public enum Comparison: String, Sendable {
    case equal = "="
    case notEqual = "IS NOT"
    case less = "<"
    case lessOrEqual = "<="
    case greater = ">"
    case greaterOrEqual = ">="
  }

  case compare(String, Comparison, QueryValue)
  case isIn(String, [QueryValue])
  case hasPrefix(String, String)
  case contains(String, String)
  case isNil(String)
  case isNotNil(String)
  case and(ModelPredicate, ModelPredicate)
  case or(ModelPredicate, ModelPredicate)
  case not(ModelPredicate)
  /// Models linked by a ``ModelRelation`` to one model: `outgoing` holds those `model` links
  /// to (whom Ada follows), otherwise those that link to `model` (Ada's followers).
  case linked(relation: String, modelType: String, modelID: String, outgoing: Bool)

  public static func && (lhs: ModelPredicate, rhs: ModelPredicate) -> ModelPredicate { .and(lhs, rhs) }
  public static func || (lhs: ModelPredicate, rhs: ModelPredicate) -> ModelPredicate { .or(lhs, rhs) }
  public static prefix func ! (operand: ModelPredicate) -> ModelPredicate { .not(operand) }
}

/// A scalar a field is compared with, in the form `JSONEncoder` gives it in the body.
public enum QueryValue: Sendable, Hashable, Encodable {
  case int(Int64)
  case double(Double)
  case string(String)
  case bool(Bool)

  var sqlValue: SQLValue {
    switch self {
    case .int(let v): .integer(v)
    case .double(let v): .real(v)
    case .string(let v): .text(v)
    // JSON true/false come out of json_extract as 1/0.
    case .bool(let v): .integer(v ? 1 : 0)
    }
  }

  public func encode(to encoder: any Encoder) throws {
    var container = encoder.singleValueContainer()
    switch self {
    case .int(let v): try container.encode(v)
    case .double(let v): try container.encode(v)
    case .string(let v): try container.encode(v)
    case .bool(let v): try container.encode(v)
    }
  }
}

/// Types usable on the right of a ``Field`` comparison.
public protocol QueryValueConvertible: Sendable {
  var queryValue: QueryValue { get }
}

extension QueryValue: QueryValueConvertible { public var queryValue: QueryValue { self } }
extension Int: QueryValueConvertible { public var queryValue: QueryValue { .int(Int64(self)) } }
extension Int64: QueryValueConvertible { public var queryValue: QueryValue { .int(self) } }
extension Int32: QueryValueConvertible { public var queryValue: QueryValue { .int(Int64(self)) } }
extension Double: QueryValueConvertible { public var queryValue: QueryValue { .double(self) } }
extension String: QueryValueConvertible { public var queryValue: QueryValue { .string(self) } }
extension Bool: QueryValueConvertible { public var queryValue: QueryValue { .bool(self) } }
extension Date: QueryValueConvertible {
  /// `JSONEncoder`'s default date strategy: seconds since 2001-01-01.
  public var queryValue: QueryValue { .double(timeIntervalSinceReferenceDate) }
}
