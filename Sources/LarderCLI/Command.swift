import Foundation

/// A `larder` subcommand, in swift-argument-parser's shape: a type with a static configuration,
/// built from parsed arguments (which checks all input, so bad usage fails before anything
/// runs), then `run()`.
protocol Command {
  static var configuration: CommandConfiguration { get }
  /// Reads and checks the parsed arguments. Throwing here is bad usage: exit status 2.
  init(_ arguments: ParsedArguments) throws(UsageError)
  func run() throws
}

/// What a command is called, what it takes and how it explains itself.
struct CommandConfiguration: Sendable {
  /// `gc`, or `rules check` for a verb under a group.
  let name: String
  /// One line for `larder --help`.
  let summary: String
  /// Prose under the usage line in `--help`.
  let discussion: String
  let positionals: [Positional]
  /// The command's own options, then its groups' (which the usage line lists last).
  let options: [Option]
  /// Sets of the options of which exactly one must be given.
  let exclusive: [ExclusiveOptions]

  init(
    name: String, summary: String, discussion: String = "", positionals: [Positional] = [],
    options: [Option] = [], exclusive: [ExclusiveOptions] = [], groups: [any OptionGroup.Type] = []
  ) {
    self.name = name
    self.summary = summary
    self.discussion = discussion
    self.positionals = positionals
    self.options = options + groups.flatMap { $0.options }
    self.exclusive = exclusive
    var seen = Set<String>()
    for spelling in self.options.flatMap(\.spellings) + ["--help", "-h"] {
      precondition(seen.insert(spelling).inserted, "\(name): option \(spelling) is declared twice")
    }
    for set in exclusive {
      for option in set.options {
        precondition(options.contains { $0.name == option.name }, "\(name): \(option.name) is not declared")
      }
    }
  }

  /// The exclusive set `option` belongs to, if any.
  func exclusiveSet(of option: Option) -> ExclusiveOptions? {
    exclusive.first { $0.options.contains { $0.name == option.name } }
  }

  func option(spelled spelling: String) -> Option? {
    options.first { $0.spellings.contains(spelling) }
  }
}
