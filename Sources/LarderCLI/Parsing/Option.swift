/// One option of a command, declared once: the parser, `--help` and the usage line all read it,
/// so what a command accepts and what it says it accepts cannot drift apart.
///
/// ```swift
/// static let grace = Option.value("--grace", "DURATION", default: "24h", help: "how old an unreferenced file must be")
/// …
/// grace = try parseDuration(arguments.value(Self.grace)!)
/// ```
struct Option: Sendable {
  enum Kind: Sendable {
    /// `--json`: present or not; `--json=x` is a usage error.
    case flag
    /// `--port 8080` or `--port=8080`, at most once.
    case value
    /// `--cors-origin O`, as often as wanted; the values in order.
    case repeatedValue
  }

  /// The long name, `--content-type`; errors and the table key use it.
  let name: String
  /// Other spellings, `-o` for `--output`.
  let aliases: [String]
  let kind: Kind
  /// What the value is, in the usage line: `DIR`, `SIZE`, `k=v`. Empty for flags.
  let placeholder: String
  /// Used when neither the command line nor the environment gives a value; shown in `--help`.
  let defaultValue: String?
  /// Read when the command line does not give the option. A flag's variable turns it on when `1`.
  let environment: String?
  /// Missing (from the command line and the environment) is a usage error: `--uid is required`.
  let isRequired: Bool
  let help: String

  static func flag(_ name: String, aliases: [String] = [], environment: String? = nil, help: String) -> Option
  {
    Option(
      name: name, aliases: aliases, kind: .flag, placeholder: "", defaultValue: nil, environment: environment,
      isRequired: false, help: help)
  }

  static func value(
    _ name: String, _ placeholder: String, aliases: [String] = [], default defaultValue: String? = nil,
    environment: String? = nil, required: Bool = false, help: String
  ) -> Option {
    Option(
      name: name, aliases: aliases, kind: .value, placeholder: placeholder, defaultValue: defaultValue,
      environment: environment, isRequired: required, help: help)
  }

  static func repeated(_ name: String, _ placeholder: String, help: String) -> Option {
    Option(
      name: name, aliases: [], kind: .repeatedValue, placeholder: placeholder, defaultValue: nil,
      environment: nil,
      isRequired: false, help: help)
  }

  /// Every spelling, short ones first: `-o`, `--output`.
  var spellings: [String] { aliases + [name] }
}

/// Options of which exactly one must be given (on the command line or by its environment
/// variable), declared in the table so the parser's check and `--help` come from one place:
/// the usage line shows `(--rules FILE | --allow-all)`, the help text says one is required.
///
/// ```swift
/// static let policy = ExclusiveOptions([rules, allowAll], missing: "no access policy: pass --rules FILE, …")
/// ```
struct ExclusiveOptions: Sendable {
  let options: [Option]
  /// The usage error when none is given: what is missing and how to choose.
  let missing: String

  init(_ options: [Option], missing: String) {
    precondition(options.count >= 2 && options.allSatisfy { $0.kind != .repeatedValue && !$0.isRequired })
    self.options = options
    self.missing = missing
  }

  /// `--rules FILE and --allow-all`, for the help text.
  var spelled: String {
    options.map { $0.kind == .flag ? $0.name : "\($0.name) \($0.placeholder)" }.joined(separator: " and ")
  }
}

/// A positional argument: `FILE`, `BUCKET/NAME`.
struct Positional: Sendable {
  let name: String
  let isOptional: Bool
  let help: String

  init(_ name: String, optional: Bool = false, help: String) {
    self.name = name
    self.isOptional = optional
    self.help = help
  }
}

/// Options several commands share, declared once, like swift-argument-parser's `@OptionGroup`.
///
/// A command lists the group in its ``CommandConfiguration`` (so parsing and `--help` know the
/// options) and builds it in `init` from the parsed arguments:
///
/// ```swift
/// static let configuration = CommandConfiguration(name: "rm", …, groups: [StoreOptions.self])
/// init(_ arguments: ParsedArguments) throws(UsageError) { store = try StoreOptions(arguments) }
/// ```
protocol OptionGroup {
  static var options: [Option] { get }
  init(_ arguments: ParsedArguments) throws(UsageError)
}
