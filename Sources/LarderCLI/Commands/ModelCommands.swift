import Foundation
import Larder

/// `larder models export TYPE`: a model type's records as a JSON array on standard output.
struct ModelsExportCommand: Command {
  static let type = Positional("TYPE", help: "the model type (its modelType, e.g. User)")

  static let configuration = CommandConfiguration(
    name: "models export", summary: "print a model type's records as a JSON array",
    discussion: "One document per line, ordered by id: what `larder models import` reads back.",
    positionals: [type], groups: [StoreOptions.self])

  var store: StoreOptions
  var type: String

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    type = arguments.required(Self.type)
  }

  func run() throws {
    FileHandle.standardOutput.write(try store.open().models.exportDocuments(type: type))
  }
}

/// `larder models import TYPE FILE`: saves a JSON array of documents as records of TYPE.
struct ModelsImportCommand: Command {
  static let type = ModelsExportCommand.type
  static let source = Positional("FILE", help: "a JSON array of documents; - for standard input")

  static let configuration = CommandConfiguration(
    name: "models import", summary: "save a JSON array of documents as a model type's records",
    discussion: """
      All or nothing, in one transaction. Each document needs a string id; a File in it must be
      stored (same id and SHA-256) and is attached; the references recorded for the type are
      kept and each target must exist. Records with the same id are replaced.
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
    let data: Data
    if source == "-" {
      data = FileHandle.standardInput.readDataToEndOfFile()
    } else {
      guard let read = FileManager.default.contents(atPath: source) else {
        throw CommandFailure("cannot read \(source)")
      }
      data = read
    }
    let count = try store.open().models.importDocuments(type: type, from: data)
    print("imported \(count) \(type) records")
  }
}
