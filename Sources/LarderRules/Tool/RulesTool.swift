import Foundation

/// What `larder rules check` and `larder rules eval` do, kept here so the CLI stays a thin
/// argument parser and the behaviour is testable without spawning a process.
public enum RulesTool {
  /// `larder rules check FILE`: ok with "FILE: ok" or the rendered diagnostics.
  public static func check(path: String) -> (ok: Bool, output: String) {
    let source: String
    do {
      source = try String(contentsOfFile: path, encoding: .utf8)
    } catch {
      return (false, "\(path): error: cannot read file: \(error.localizedDescription)")
    }
    do {
      _ = try RuleSet.parse(source, fileName: path)
      return (true, "\(path): ok")
    } catch {
      return (false, error.description)
    }
  }

  /// `larder rules eval FILE --op OP --path /b/B/o/NAME [--uid U] [--size N] [--content-type T]`.
  ///
  /// `op` is an operation or `read`/`write`, which check every operation they cover and
  /// print one line each. For get/update/delete a stored object is assumed to exist (same
  /// name, size and type); for create/update the incoming object has `size`/`contentType`.
  /// Exit code: 0 when every checked operation is allowed, 1 when any is denied, 2 for
  /// unreadable or invalid input.
  ///
  ///     RulesTool.eval(path: "storage.rules", operation: "write", requestPath: "/b/dev/o/users/u1/a.txt", uid: "u1")
  public static func eval(
    path: String, operation: String, requestPath: String, uid: String? = nil, size: Int64? = nil,
    contentType: String? = nil, time: Date = Date()
  ) -> (exitCode: Int32, output: String) {
    guard let operations = RuleOperation.expand(operation) else {
      return (2, "error: unknown operation '\(operation)' (read, write, get, list, create, update, delete)")
    }
    guard requestPath.hasPrefix("/b/") else {
      return (2, "error: path must look like /b/BUCKET/o/OBJECT, got '\(requestPath)'")
    }
    let afterBucketPrefix = requestPath.dropFirst(3)
    // After the bucket comes exactly `/o` or `/o/NAME`: `/opublic/x` is not the object `public/x`.
    guard let slash = afterBucketPrefix.firstIndex(of: "/") else {
      return (2, "error: path must look like /b/BUCKET/o/OBJECT, got '\(requestPath)'")
    }
    let rest = afterBucketPrefix[slash...]
    guard rest == "/o" || rest.hasPrefix("/o/") else {
      return (2, "error: path must look like /b/BUCKET/o/OBJECT, got '\(requestPath)'")
    }
    let bucket = String(afterBucketPrefix[..<slash])
    let objectName = String(rest.dropFirst(3))
    guard !bucket.isEmpty else { return (2, "error: empty bucket in '\(requestPath)'") }

    let source: String
    do {
      source = try String(contentsOfFile: path, encoding: .utf8)
    } catch {
      return (2, "\(path): error: cannot read file: \(error.localizedDescription)")
    }
    let rules: RuleSet
    do {
      rules = try RuleSet.parse(source, fileName: path)
    } catch {
      return (2, error.description)
    }
    let object = RuleResource(
      name: objectName, bucket: bucket, size: size ?? 0,
      contentType: contentType ?? "application/octet-stream",
      // One type to try: the content is assumed to be what it claims.
      detectedContentType: contentType ?? "application/octet-stream",
      timeCreated: time, updated: time)
    var lines: [String] = []
    var allAllowed = true
    for op in operations {
      let request = RuleRequest(
        operation: op, bucket: bucket, objectName: objectName,
        auth: uid.map { RuleAuth(uid: $0, token: ["sub": .string($0)]) },
        time: time,
        resource: op == .create || op == .list ? nil : object,
        requestResource: op == .create || op == .update ? object : nil)
      let decision = rules.evaluate(request)
      allAllowed = allAllowed && decision.allowed
      lines.append("\(op.rawValue): \(decision.allowed ? "ALLOW" : "DENY") - \(decision.reason)")
    }
    return (allAllowed ? 0 : 1, lines.joined(separator: "\n"))
  }
}
