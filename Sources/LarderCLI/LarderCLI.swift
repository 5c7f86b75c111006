import Foundation
import Larder

/// The subcommands, in the order `larder --help` lists them.
var commands: [any Command.Type] {
  [
    ServeCommand.self, PutCommand.self, GetCommand.self, ListCommand.self, StatCommand.self, RemoveCommand.self,
    CopyCommand.self, GCCommand.self, VerifyCommand.self, CatalogMigrateCommand.self, CatalogCopyCommand.self, TokenCommand.self,
    RulesCheckCommand.self, RulesEvalCommand.self, ServiceAccountCreateCommand.self, ServiceAccountListCommand.self,
    ServiceAccountRevokeCommand.self, ServiceAccountTokenCommand.self, ModelsExportCommand.self,
    ModelsImportCommand.self, ImagesWarmCommand.self, BackupCommand.self, BackupListCommand.self,
    BackupVerifyCommand.self, BackupPruneCommand.self, RestoreCommand.self, EventsSubscribeCommand.self, EventsListCommand.self,
    EventsUnsubscribeCommand.self, EventsDeliveriesCommand<PendingDeliveries>.self,
    EventsDeliveriesCommand<DeadDeliveries>.self, EventsReplayCommand.self,
  ]
}

@MainActor func helpText() -> String {
  var text = "usage: larder COMMAND [options]\n\ncommands:\n"
  let width = commands.map { $0.configuration.name.count }.max() ?? 12
  for c in commands {
    let configuration = c.configuration
    text +=
      "  \(configuration.name.padding(toLength: width, withPad: " ", startingAt: 0)) \(configuration.summary)\n"
  }
  let data = DataOptions.data
  text +=
    "\nCommands that use a data directory take \(data.name) \(data.placeholder) (or \(data.environment!); "
  text += "default \(data.defaultValue!)); every command takes --help.\n"
  let (server, key) = (ObjectOptions.server, ObjectOptions.key)
  text += "put, get, ls, stat, rm and cp act on a server instead with \(server.name) \(server.placeholder) "
  text += "\(key.name) \(key.placeholder)\n(or \(server.environment!), \(key.environment!)), given before or after the command.\n"
  text += "larder --version prints the version.\n"
  return text
}

@MainActor func printHelp() {
  print("larder: self-hosted file and blob storage\n\n" + helpText(), terminator: "")
}

/// The index of the first argument that is not valid UTF-8, if any.
///
/// `CommandLine.arguments` repairs such bytes to U+FFFD, which would silently store an object
/// under another name than the one given (or look for another file), so they are refused.
func firstNonUTF8Argument() -> Int? {
  for i in 1..<Int(CommandLine.argc) {
    guard let p = CommandLine.unsafeArgv[i] else { continue }
    let bytes = UnsafeBufferPointer(
      start: UnsafeRawPointer(p).assumingMemoryBound(to: UInt8.self), count: strlen(p))
    if String(validating: bytes, as: UTF8.self) == nil { return i }
  }
  return nil
}

/// What `larder --version` prints after `larder `.
public let larderVersion = "0.34.0"

/// The `larder` command line: `larder COMMAND [options]`.
///
/// ```swift
/// exit(LarderCLI.main())
/// ```
public enum LarderCLI {
  /// Runs the command named by the process's arguments; returns its exit status.
  @MainActor public static func main() -> Int32 { run(faults: .none) }

  /// ``main()`` whose command's stores and service call `faults` (the test-only build, which
  /// crashes at a named point): handed to the command with its parsed arguments.
  @MainActor package static func main(faults: FaultInjector) -> Int32 { run(faults: faults) }
}

@MainActor func run(faults: FaultInjector) -> Int32 {
  if let index = firstNonUTF8Argument() {
    Output.error("argument \(index) is not valid UTF-8 (names and paths must be UTF-8); see 'larder --help'")
    return 2
  }
  var args = Array(CommandLine.arguments.dropFirst())
  if args.first == "--version" || args.first == "-V" {
    print("larder \(larderVersion)")
    return 0
  }
  // `larder --server URL --key K ls …`: options of the object commands may come first.
  var leading: [String] = []
  while let option = args.first, let spelled = ObjectOptions.leading.first(where: {
    option == $0.name || option.hasPrefix($0.name + "=")
  }) {
    leading.append(args.removeFirst())
    if !option.contains("=") {
      guard !args.isEmpty else {
        Output.error("\(spelled.name) needs a value; see 'larder --help'")
        return 2
      }
      leading.append(args.removeFirst())
    }
  }
  guard let first = args.first, first != "--help", first != "-h", first != "help" else {
    printHelp()
    return args.isEmpty ? 2 : 0
  }
  args.removeFirst()
  // `larder rules check` and similar: a group name followed by its verb.
  var commandName = first
  if let verb = args.first, commands.contains(where: { $0.configuration.name == "\(first) \(verb)" }) {
    commandName = "\(first) \(verb)"
    args.removeFirst()
  }
  guard let type = commands.first(where: { $0.configuration.name == commandName }) else {
    Output.error("unknown command '\(first)'; see 'larder --help'")
    // Bad usage prints the usage, as every command's does.
    FileHandle.standardError.write(Data(helpText().utf8))
    return 2
  }
  let configuration = type.configuration
  if !leading.isEmpty {
    guard configuration.option(spelled: ObjectOptions.server.name) != nil else {
      Output.error("\(leading[0].split(separator: "=")[0]) applies to put, get, ls, stat, rm and cp, not \(commandName)")
      return 2
    }
    // After the command's own arguments' options, before a `--`.
    if let end = args.firstIndex(of: "--") { args.insert(contentsOf: leading, at: end) } else { args += leading }
  }
  if ParsedArguments.wantsHelp(args) {
    print(HelpFormatter.help(configuration), terminator: "")
    return 0
  }
  let command: any Command
  do {
    command = try type.init(
      ParsedArguments(args, for: configuration, environment: ProcessInfo.processInfo.environment, faults: faults))
  } catch {
    Output.error("\(error)")
    let usage = HelpFormatter.usage(configuration)
    FileHandle.standardError.write(Data("\(usage)\nsee 'larder \(configuration.name) --help'\n".utf8))
    return 2
  }
  do {
    try command.run()
    return 0
  } catch let exit as Exit {
    return exit.code
  } catch let error as UsageError {
    Output.error("\(error)")
    return 2
  } catch {
    Output.error("\(error)")
    return 1
  }
}
