import Foundation

/// `--data DIR` (or `LARDER_DATA`; default `./data`): the data directory.
///
/// Every command that opens the store takes it through ``StoreOptions``, which includes it.
struct DataOptions: OptionGroup {
  static let data = Option.value(
    "--data", "DIR", default: "./data", environment: "LARDER_DATA", help: "the data directory")
  static let options = [data]

  var directory: URL

  init(_ arguments: ParsedArguments) throws(UsageError) {
    let path = arguments.value(Self.data) ?? ""
    guard !path.isEmpty else { throw UsageError("--data needs a directory") }
    directory = URL(fileURLWithPath: path)
  }
}
