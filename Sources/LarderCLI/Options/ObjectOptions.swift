import Foundation

/// Where `put`, `get`, `ls`, `stat`, `rm` and `cp` act: a server (`--server URL`, with a
/// service-account key `--key FILE`), else the store the ``StoreOptions`` name.
///
/// `larder --server URL --key KEY.json ls app` is the same as `larder ls app --server URL --key KEY.json`:
/// the top level hands options given before the command to it.
struct ObjectOptions: OptionGroup {
  static let server = Option.value(
    "--server", "URL", environment: "LARDER_SERVER",
    help: "a Larder server to act on over the GCS JSON API instead of the data directory")
  static let key = Option.value(
    "--key", "FILE", environment: "LARDER_KEY",
    help: "with --server: a service-account key file (larder service-account create) to act as that account")
  static let options = [server, key] + StoreOptions.options

  /// The options the top level accepts before a command, for the commands that take them.
  static let leading = [server, key]

  var store: StoreOptions
  var server: String?
  var keyFile: String?

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    server = arguments.value(Self.server).flatMap { $0.isEmpty ? nil : $0 }
    keyFile = arguments.value(Self.key).flatMap { $0.isEmpty ? nil : $0 }
    if keyFile != nil && server == nil {
      throw UsageError("--key needs --server URL (the server to act on with the key)")
    }
    if let server { try RemoteObjectTarget.validate(server: server) }
  }

  /// The objects the options name.
  func open() throws -> any ObjectTarget {
    guard let server else { return LocalObjectTarget(larder: try store.open()) }
    return try RemoteObjectTarget(
      server: server, credentials: try keyFile.map { try ServiceAccountCredentials(keyFile: $0) })
  }
}
