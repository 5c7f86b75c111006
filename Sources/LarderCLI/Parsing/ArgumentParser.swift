import Larder

/// The arguments of one command, parsed against its ``CommandConfiguration`` and checked:
/// unknown options, missing values, repeated single options, missing required options, none or
/// several of an exclusive set, and the wrong number of positionals are usage errors before the
/// command sees anything.
///
/// The rules:
/// - `--name value` and `--name=value`. A next token that starts with `--` is not taken as a
///   value (`--content-type --json` is a missing value); `--content-type=--json` passes it.
///   Other tokens starting with `-` are values (`--max-size -5` reaches the size check).
/// - A value option given twice is an error; a repeated-value option collects values in order.
/// - `-` alone is a positional (standard input); after `--` everything is positional.
/// - An option missing from the command line falls back to its environment variable, then its
///   default.
///
/// ```swift
/// let parsed = try ParsedArguments(["f", "b/n", "--json"], for: PutCommand.configuration)
/// parsed.flag(PutCommand.json)   // true
/// ```
struct ParsedArguments {
  let configuration: CommandConfiguration
  private let given: [String: [String]]
  private let positionals: [String]
  private let environment: [String: String]
  /// What the stores the command opens inject (``StoreOptions``): none but in tests.
  let faults: FaultInjector

  /// True when `--help` or `-h` appears before any `--`: help wins over every other problem.
  static func wantsHelp(_ tokens: [String]) -> Bool {
    tokens.prefix { $0 != "--" }.contains { $0 == "--help" || $0 == "-h" }
  }

  init(
    _ tokens: [String], for configuration: CommandConfiguration, environment: [String: String],
    faults: FaultInjector = .none
  ) throws(UsageError) {
    self.configuration = configuration
    self.environment = environment
    self.faults = faults
    var given: [String: [String]] = [:]
    var positionals: [String] = []
    var onlyPositional = false
    var index = 0
    while index < tokens.count {
      let token = tokens[index]
      index += 1
      if onlyPositional || token == "-" || !token.hasPrefix("-") {
        positionals.append(token)
        continue
      }
      if token == "--" {
        onlyPositional = true
        continue
      }
      let equals = token.firstIndex(of: "=")
      let spelling = equals.map { String(token[..<$0]) } ?? token
      let inline = equals.map { String(token[token.index(after: $0)...]) }
      guard let option = configuration.option(spelled: spelling) else {
        throw UsageError("unknown option '\(spelling)'")
      }
      if option.kind != .repeatedValue, given[option.name] != nil {
        throw UsageError("\(option.spellings.joined(separator: "/")) given more than once")
      }
      guard option.kind != .flag else {
        if inline != nil { throw UsageError("\(spelling) takes no value") }
        given[option.name] = [""]
        continue
      }
      if let inline {
        given[option.name, default: []].append(inline)
      } else if index < tokens.count, !tokens[index].hasPrefix("--") {
        given[option.name, default: []].append(tokens[index])
        index += 1
      } else if index < tokens.count {
        let next = tokens[index]
        throw UsageError(
          "\(spelling) needs a value, not the option '\(next)' (write \(spelling)=\(next) to pass it as the value)"
        )
      } else {
        throw UsageError("\(spelling) needs a value")
      }
    }
    self.given = given
    self.positionals = positionals

    for option in configuration.options where option.isRequired && value(option) == nil {
      throw UsageError("\(option.name) is required")
    }
    for set in configuration.exclusive {
      let present = set.options.filter { isGiven($0) }
      if present.isEmpty { throw UsageError(set.missing) }
      if present.count > 1 {
        throw UsageError("\(present.map(\.name).joined(separator: " and ")) exclude each other")
      }
    }
    let required = configuration.positionals.filter { !$0.isOptional }
    if positionals.count < required.count {
      throw UsageError("missing argument \(required[positionals.count].name)")
    }
    if positionals.count > configuration.positionals.count {
      throw UsageError("unexpected argument '\(positionals[configuration.positionals.count])'")
    }
  }

  /// Whether a flag was given, or its environment variable is `1`.
  func flag(_ option: Option) -> Bool {
    precondition(option.kind == .flag && isDeclared(option), "\(option.name) is not a declared flag")
    if given[option.name] != nil { return true }
    return option.environment.map { environment[$0] == "1" } ?? false
  }

  /// The option's value from the command line, else its environment variable (even when empty),
  /// else its default.
  func value(_ option: Option) -> String? {
    precondition(option.kind == .value && isDeclared(option), "\(option.name) is not a declared value option")
    if let value = given[option.name]?.last { return value }
    if let name = option.environment, let value = environment[name] { return value }
    return option.defaultValue
  }

  /// Every value of a repeated option, in command-line order.
  func values(_ option: Option) -> [String] {
    precondition(
      option.kind == .repeatedValue && isDeclared(option), "\(option.name) is not a declared repeated option")
    return given[option.name] ?? []
  }

  /// The positional's argument; nil only for an optional one not given.
  func value(_ positional: Positional) -> String? {
    guard let index = configuration.positionals.firstIndex(where: { $0.name == positional.name }) else {
      preconditionFailure("\(positional.name) is not a declared positional")
    }
    return index < positionals.count ? positionals[index] : nil
  }

  /// A required positional's argument (the parser has checked it is there).
  func required(_ positional: Positional) -> String {
    guard let value = value(positional) else { preconditionFailure("\(positional.name) is optional") }
    return value
  }

  /// Given on the command line or by its environment variable (a default does not count).
  private func isGiven(_ option: Option) -> Bool {
    if given[option.name] != nil { return true }
    guard let name = option.environment, let value = environment[name] else { return false }
    return option.kind == .flag ? value == "1" : true
  }

  /// Reading an option the command did not declare is a programming error, caught at once.
  private func isDeclared(_ option: Option) -> Bool {
    configuration.options.contains { $0.name == option.name }
  }
}
