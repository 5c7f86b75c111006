import Foundation
import LarderRules

struct RulesCheckCommand: Command {
  static let file = Positional("FILE", help: "the storage.rules file")

  static let configuration = CommandConfiguration(
    name: "rules check", summary: "check a storage.rules file (exit 0, or diagnostics and 1)",
    positionals: [file])

  var file: String

  init(_ arguments: ParsedArguments) throws(UsageError) {
    file = arguments.required(Self.file)
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
  static let file = Positional("FILE", help: "the storage.rules file")
  static let op = Option.value(
    "--op", "OP", required: true, help: "read, write, get, list, create, update or delete")
  static let path = Option.value("--path", "/b/BUCKET/o/NAME", required: true, help: "the request's path")
  static let uid = Option.value("--uid", "U", help: "request.auth.uid (no token when absent)")
  static let size = Option.value("--size", "SIZE", help: "request.resource.size")
  static let contentType = Option.value("--content-type", "TYPE", help: "request.resource.contentType")

  static let configuration = CommandConfiguration(
    name: "rules eval", summary: "evaluate one request against a storage.rules file",
    discussion: "Prints ALLOW or DENY with the deciding rule; exit 0 for allow, 1 for deny.",
    positionals: [file], options: [op, path, uid, size, contentType])

  var file: String
  var op: String
  var path: String
  var uid: String?
  var size: Int64?
  var contentType: String?

  init(_ arguments: ParsedArguments) throws(UsageError) {
    op = arguments.value(Self.op)!
    path = arguments.value(Self.path)!
    uid = arguments.value(Self.uid)
    size = try arguments.value(Self.size).map { text throws(UsageError) in try parseSize(text) }
    contentType = arguments.value(Self.contentType)
    file = arguments.required(Self.file)
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
