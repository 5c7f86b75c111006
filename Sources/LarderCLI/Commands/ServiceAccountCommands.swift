import Foundation
import Larder
import LarderAuth
import LarderServer

/// `larder service-account create NAME`: a Google-format service-account key file.
struct ServiceAccountCreateCommand: Command {
  static let name = Positional("NAME", help: "the account's name: lower-case letters, digits and '-'")
  static let publicURL = Option.value(
    "--public-url", "URL", environment: "LARDER_PUBLIC_URL",
    help:
      "where clients reach the server; the key file's token_uri is URL/token (default \(ServiceAccounts.defaultPublicURL))"
  )
  static let output = Option.value(
    "--output", "FILE",
    help: "write the key file here (mode 600, never over an existing file); default: NAME.json")

  static let configuration = CommandConfiguration(
    name: "service-account create",
    summary: "make a service account key file (for google-auth, the Admin SDKs)",
    discussion: """
      Makes an RSA 2048 key and writes the key file Google clients read (type service_account,
      private_key_id, private_key, client_email NAME@larder.iam.larder, token_uri URL/token). The
      catalog keeps only the public key, so every node sharing the catalog accepts the account;
      the private key is only in the file. A service account is an admin identity: storage
      rules do not apply to it. Running create again for a NAME adds another key (rotation).
      The private key is never printed: keep the file out of version control.
      """,
    positionals: [name], options: [publicURL, output], groups: [StoreOptions.self])

  var store: StoreOptions
  var account: String
  var url: String
  var outputPath: String

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    account = arguments.required(Self.name)
    do { try ServiceAccounts.validate(name: account) } catch { throw UsageError("\(error)") }
    url =
      arguments.value(Self.publicURL).flatMap { $0.isEmpty ? nil : $0 } ?? ServiceAccounts.defaultPublicURL
    outputPath = arguments.value(Self.output).flatMap { $0.isEmpty ? nil : $0 } ?? "\(account).json"
    if outputPath == "-" {
      throw UsageError("the key file holds a private key: it is written to a file (mode 600), not to standard output")
    }
  }

  func run() throws {
    let larder = try store.open()
    // Claimed before the key is made, so an existing file is refused with nothing recorded.
    let fd = open(outputPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard fd >= 0 else {
      throw CommandFailure("cannot create \(outputPath): \(String(cString: strerror(errno)))")
    }
    let handle = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
    let created: ServiceAccounts.Created
    do { created = try ServiceAccounts.create(name: account, publicURL: url, in: larder) } catch {
      unlink(outputPath)
      throw error
    }
    try handle.write(contentsOf: created.keyFileJSON())
    try handle.synchronize()
    Output.note("wrote \(outputPath): \(created.record.clientEmail), key \(created.record.keyID)")
  }
}

/// `larder service-account list`.
struct ServiceAccountListCommand: Command {
  static let json = Option.flag("--json", help: "print JSON")
  static let configuration = CommandConfiguration(
    name: "service-account list", summary: "list service accounts' keys (name, email, key id, created)",
    options: [json], groups: [StoreOptions.self])

  var store: StoreOptions
  var asJSON: Bool

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    asJSON = arguments.flag(Self.json)
  }

  func run() throws {
    let keys = try store.open().serviceAccountKeys()
    if asJSON {
      struct Entry: Encodable {
        let name, clientEmail, keyID: String
        let created: Date
      }
      print(
        try Output.json(
          keys.map {
            Entry(name: $0.name, clientEmail: $0.clientEmail, keyID: $0.keyID, created: $0.createdAt)
          }))
      return
    }
    for key in keys {
      print(
        "\(key.name)\t\(key.clientEmail)\t\(key.keyID)\t\(ISO8601DateFormatter().string(from: key.createdAt))"
      )
    }
  }
}

/// `larder service-account revoke NAME|EMAIL|KEY_ID`.
struct ServiceAccountRevokeCommand: Command {
  static let account = Positional("NAME|EMAIL|KEY_ID", help: "the account (all its keys) or one key")
  static let configuration = CommandConfiguration(
    name: "service-account revoke",
    summary: "revoke a service account's keys (its tokens and signed URLs stop working)",
    discussion: """
      Deletes the keys from the catalog. Access tokens and signed URLs made with them are refused
      from then on, on every node within its key cache's time (5 seconds). Exit 1 if nothing matched.
      """,
    positionals: [account], groups: [StoreOptions.self])

  var store: StoreOptions
  var target: String

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    target = arguments.required(Self.account)
  }

  func run() throws {
    let revoked = try store.open().revokeServiceAccountKeys(matching: target)
    guard !revoked.isEmpty else { throw CommandFailure("no service account or key matches '\(target)'") }
    for key in revoked { print("revoked \(key.clientEmail) key \(key.keyID)") }
  }
}

/// `larder service-account token NAME|EMAIL`: an access token of the account's newest key.
struct ServiceAccountTokenCommand: Command {
  static let account = Positional("NAME|EMAIL", help: "the account")
  static let ttl = Option.value(
    "--ttl", "DURATION", default: "1h", help: "how long the token is valid (at most 1h, as /token grants)")
  static let configuration = CommandConfiguration(
    name: "service-account token",
    summary: "print a service account's access token (an admin identity, e.g. for the console's Store view)",
    discussion: """
      The token is what POST /token answers for the account's newest key, made here from the
      catalog instead: whoever may run this may already create accounts. Rules do not apply to it;
      revoking the key ends it. Paste it into the console's sign-in to see the Store view.
      """,
    positionals: [account], options: [ttl], groups: [StoreOptions.self])

  var store: StoreOptions
  var target: String
  var ttl: Duration

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    target = arguments.required(Self.account)
    ttl = try parseDuration(arguments.value(Self.ttl)!)
    guard ttl > .zero, ttl <= .seconds(ServiceAccountAccessToken.lifetime) else {
      throw UsageError("--ttl must be more than 0 and at most 1h")
    }
  }

  func run() throws {
    let larder = try store.open()
    guard
      let key = try larder.serviceAccountKeys().filter({ $0.name == target || $0.clientEmail == target })
        .max(by: { $0.createdAt < $1.createdAt })
    else { throw CommandFailure("no service account matches '\(target)'") }
    print(
      ServiceAccountAccessToken.issue(
        secret: try LarderService.tokenSecret(of: larder), clientEmail: key.clientEmail, keyID: key.keyID,
        scope: "https://www.googleapis.com/auth/devstorage.full_control", ttl: Double(ttl.components.seconds))
    )
  }
}
