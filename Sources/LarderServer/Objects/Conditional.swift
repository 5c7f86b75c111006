import Foundation
import LarderHTTP

/// RFC 9110 §13.2.2: the order in which preconditions are evaluated for GET and HEAD.
enum Conditional: Equatable {
  case proceed(honourRange: Bool)
  case notModified
  case preconditionFailed

  static func evaluate(_ request: HTTPRequest, etag: String, lastModified: Date) -> Conditional {
    let modifiedSecond = lastModified.timeIntervalSince1970.rounded(.down)
    if let ifMatch = request.headers["If-Match"] {
      if !matches(ifMatch, etag: etag, weak: false) { return .preconditionFailed }
    } else if let text = request.headers["If-Unmodified-Since"], let date = HTTPDate.parse(text) {
      if modifiedSecond > date.timeIntervalSince1970 { return .preconditionFailed }
    }
    if let ifNoneMatch = request.headers["If-None-Match"] {
      if matches(ifNoneMatch, etag: etag, weak: true) { return .notModified }
    } else if let text = request.headers["If-Modified-Since"], let date = HTTPDate.parse(text) {
      if modifiedSecond <= date.timeIntervalSince1970 { return .notModified }
    }
    if let ifRange = request.headers["If-Range"], request.headers["Range"] != nil {
      let trimmed = ifRange.trimmingCharacters(in: .whitespaces)
      if trimmed.hasPrefix("\"") {
        return .proceed(honourRange: trimmed == etag)
      }
      if let date = HTTPDate.parse(trimmed) {
        return .proceed(honourRange: modifiedSecond == date.timeIntervalSince1970)
      }
      return .proceed(honourRange: false)
    }
    return .proceed(honourRange: true)
  }

  /// Whether an If-Match / If-None-Match list names `etag` (`*` names any).
  static func matches(_ header: String, etag: String, weak: Bool) -> Bool {
    let trimmed = header.trimmingCharacters(in: .whitespaces)
    if trimmed == "*" { return true }
    for candidate in trimmed.split(separator: ",") {
      var tag = candidate.trimmingCharacters(in: .whitespaces)
      if tag.hasPrefix("W/") {
        guard weak else { continue }
        tag.removeFirst(2)
      }
      if tag == etag { return true }
    }
    return false
  }
}
