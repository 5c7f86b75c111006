import Foundation

extension RuleValue {
  /// Converts a `JSONSerialization` value (e.g. verified JWT claims) to a rule value.
  ///
  ///     let claims = try JSONSerialization.jsonObject(with: payload) as? [String: Any] ?? [:]
  ///     let token = claims.compactMapValues(RuleValue.init(jsonObject:))
  ///
  /// JSON integers become `int`, other numbers `float`; nil for values JSON cannot hold.
  public init?(jsonObject: Any) {
    switch jsonObject {
    case is NSNull:
      self = .null
    case let s as String:
      self = .string(s)
    case let b as Bool where type(of: jsonObject) == Bool.self:
      self = .bool(b)
    case let i as Int where type(of: jsonObject) == Int.self:
      self = .int(Int64(i))
    case let i as Int64 where type(of: jsonObject) == Int64.self:
      self = .int(i)
    case let d as Double where type(of: jsonObject) == Double.self:
      self = .float(d)
    case let n as NSNumber:
      // Foundation hands JSON numbers back as NSNumber; its type code tells booleans
      // ("c") and floating point ("d"/"f") from integers.
      switch String(cString: n.objCType) {
      case "c", "B": self = .bool(n.boolValue)
      case "d", "f": self = .float(n.doubleValue)
      default: self = .int(n.int64Value)
      }
    case let a as [Any]:
      var items: [RuleValue] = []
      for item in a {
        guard let v = RuleValue(jsonObject: item) else { return nil }
        items.append(v)
      }
      self = .list(items)
    case let m as [String: Any]:
      var values: [String: RuleValue] = [:]
      for (k, item) in m {
        guard let v = RuleValue(jsonObject: item) else { return nil }
        values[k] = v
      }
      self = .map(values)
    default:
      return nil
    }
  }
}
