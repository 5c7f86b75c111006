import Foundation
import Larder

/// `larder models export TYPE`: a model type's records as a bundle, with the attached files'
/// bytes and the type's reference rules (``ModelBundle``).
struct ModelsExportCommand: Command {
  static let type = Positional("TYPE", help: "the model type (its modelType, e.g. User)")

  static let configuration = CommandConfiguration(
    name: "models export", summary: "print a model type's records, with their files, for `larder models import`",
    discussion: """
      A bundle, JSON Lines: the type's reference rules, every attached file's bytes (base64, in
      chunks), then the records by id; `larder models import` into any store (an empty one too)
      reads it back.
      """,
    positionals: [type], groups: [StoreOptions.self])

  var store: StoreOptions
  var type: String

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    type = arguments.required(Self.type)
  }

  func run() throws {
    let larder = try store.open()
    try larder.models.exportBundle(type: type, { FileHandle.standardOutput.write($0) }, files: larder.files)
  }
}

/// `larder models import TYPE FILE`: saves a JSON array of documents as records of TYPE.
struct ModelsImportCommand: Command {
  static let type = ModelsExportCommand.type
  static let source = Positional("FILE", help: "a bundle or a JSON array of documents; - for standard input")

  static let configuration = CommandConfiguration(
    name: "models import", summary: "save a bundle or a JSON array of documents as a model type's records",
    discussion: """
      All or nothing, in one transaction. Each document needs a string id. From a bundle
      (`larder models export`), each file's bytes are checked against its SHA-256 and size and
      stored, and the bundle's reference rules become the type's. From a JSON array, a File
      must be stored already (same id and SHA-256). Either way each File is attached and every
      reference's target must exist. Records with the same id are replaced.
      """,
    positionals: [type, source], groups: [StoreOptions.self])

  var store: StoreOptions
  var type: String
  var source: String

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    type = arguments.required(Self.type)
    source = arguments.required(Self.source)
  }

  func run() throws {
    let input: FileHandle
    if source == "-" {
      input = FileHandle.standardInput
    } else {
      guard let opened = FileHandle(forReadingAtPath: source) else { throw CommandFailure("cannot read \(source)") }
      input = opened
    }
    // A bundle starts with its header object; a JSON array with `[`.
    var head = Data()
    while head.count < 4096, let byte = try input.read(upToCount: 1), !byte.isEmpty {
      head.append(byte)
      if let c = byte.first, !(c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09) { break }
    }
    let larder = try store.open()
    let count: Int
    if head.last == UInt8(ascii: "{") {
      var first: Data? = head
      let reader = LineReader { n in
        if let pending = first {
          first = nil
          return pending
        }
        return try input.read(upToCount: n) ?? Data()
      }
      count = try larder.models.importBundle(type: type, from: reader, files: larder.files)
    } else {
      count = try larder.models.importDocuments(type: type, from: head + (try input.readToEnd() ?? Data()))
    }
    print("imported \(count) \(type) records")
  }
}
