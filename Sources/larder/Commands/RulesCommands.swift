import Foundation
import LarderRules

struct RulesCheckCommand: Command {
  static let name = "rules check"
  static let summary = "check a storage.rules file (exit 0, or diagnostics and 1)"
  static let usage = "usage: larder rules check FILE"
  var file: String

  init(_ arguments: inout Arguments) throws(UsageError) {
    file = try arguments.finish(positionals: 1...1)[0]
  }

  func run() throws {
    let (ok, output) = RulesTool.check(path: file)
    if ok {
      if !output.isEmpty { print(output) }
    } else {
      FileHandle.standardError.write(Data((output + "\n").utf8))
      throw Exit(code: 1)
    }
  }
}

struct RulesEvalCommand: Command {
  static let name = "rules eval"
  static let summary = "evaluate one request against a storage.rules file"
  static let usage = """
    usage: larder rules eval FILE --op read|write|get|list|create|update|delete --path /b/BUCKET/o/NAME
                             [--uid U] [--size N] [--content-type T]
      Prints ALLOW or DENY with the deciding rule; exit 0 for allow, 1 for deny.
    """
  var file: String
  var op: String
  var path: String
  var uid: String?
  var size: Int64?
  var contentType: String?

  init(_ arguments: inout Arguments) throws(UsageError) {
    guard let op = try arguments.option("--op") else { throw UsageError("--op is required") }
    guard let path = try arguments.option("--path") else { throw UsageError("--path is required") }
    self.op = op
    self.path = path
    uid = try arguments.option("--uid")
    size = try arguments.option("--size").map { text throws(UsageError) in try parseSize(text) }
    contentType = try arguments.option("--content-type")
    file = try arguments.finish(positionals: 1...1)[0]
  }

  func run() throws {
    let (code, output) = RulesTool.eval(
      path: file, operation: op, requestPath: path, uid: uid, size: size, contentType: contentType)
    if code == 2 {
      throw UsageError(output.hasPrefix("error: ") ? String(output.dropFirst(7)) : output)
    }
    print(output)
    if code != 0 { throw Exit(code: code) }
  }
}
