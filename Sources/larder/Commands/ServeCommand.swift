import Dispatch
import Foundation
import Larder
import LarderServer

struct ServeCommand: Command {
  static let name = "serve"
  static let summary = "run the HTTP service"
  static let usage = """
    usage: larder serve [--data DIR] [--host 127.0.0.1] [--port 8080] [--rules FILE | --allow-all]
                        [--max-upload-size 5GiB] [--threads N] [--public-url URL] [--cors-origin O]...
                        [--public-key FILE]... [--jwt-issuer ISS] [--jwt-audience AUD]
                        [--connection-memory-limit 64KiB] [--connection-timeout 60] [--access-log FILE|-|off]
                        [--connection-limit 1024] [--per-ip-connection-limit N]
      --rules FILE      storage.rules to enforce (default deny); SIGHUP reloads it
      --allow-all       no access control at all: development only
      --port 0          bind any free port; the bound address is printed as one line:
                        listening on http://HOST:PORT
      --public-key FILE PEM public key or JWKS file for RS256/ES256 tokens (HS256 tokens use DATA/secret)
    Environment: LARDER_DATA, LARDER_HOST, LARDER_PORT, LARDER_RULES, LARDER_MAX_UPLOAD_SIZE,
                 LARDER_THREADS, LARDER_PUBLIC_URL, LARDER_ALLOW_ALL=1 mirror the flags.
    SIGTERM or SIGINT: stop accepting, finish in-flight requests (up to 30 s), close the catalog.
    """

  var data: DataOptions
  var options: LarderService.Options
  var allowAll: Bool

  init(_ arguments: inout Arguments) throws(UsageError) {
    let env = ProcessInfo.processInfo.environment
    data = try DataOptions(&arguments)
    let host = try arguments.option("--host") ?? env["LARDER_HOST"] ?? "127.0.0.1"
    let portText = try arguments.option("--port") ?? env["LARDER_PORT"] ?? "8080"
    guard let port = Int(portText), (0...65535).contains(port) else { throw UsageError("--port must be 0…65535") }
    let rules = try arguments.option("--rules") ?? env["LARDER_RULES"]
    allowAll = arguments.flag("--allow-all") || env["LARDER_ALLOW_ALL"] == "1"
    if allowAll && rules != nil { throw UsageError("--rules and --allow-all exclude each other") }
    guard allowAll || rules != nil else {
      throw UsageError(
        "no access policy: pass --rules FILE (e.g. --rules storage.rules.example), or --allow-all for an open development server")
    }
    options = LarderService.Options(
      dataDirectory: data.directory, policy: allowAll ? .allowAll : .rulesFile(URL(fileURLWithPath: rules!)))
    options.http.host = host
    options.http.port = port
    if let text = try arguments.option("--max-upload-size") ?? env["LARDER_MAX_UPLOAD_SIZE"] {
      options.maxUploadSize = try parseSize(text)
    }
    if let text = try arguments.option("--threads") ?? env["LARDER_THREADS"] {
      guard let n = Int(text), (1...256).contains(n) else { throw UsageError("--threads must be 1…256") }
      options.http.threadPoolSize = n
    }
    if let text = try arguments.option("--connection-memory-limit") {
      options.http.connectionMemoryLimit = Int(try parseSize(text))
    }
    if let text = try arguments.option("--connection-timeout") {
      guard let n = Int(text), n >= 0 else { throw UsageError("--connection-timeout takes seconds") }
      options.http.connectionTimeout = n
    }
    if let text = try arguments.option("--connection-limit") {
      guard let n = Int(text), (1...1_000_000).contains(n) else { throw UsageError("--connection-limit must be 1…1000000") }
      options.http.connectionLimit = n
    }
    if let text = try arguments.option("--per-ip-connection-limit") {
      guard let n = Int(text), n >= 0 else { throw UsageError("--per-ip-connection-limit must be 0 (none) or more") }
      options.http.perIPConnectionLimit = n
    }
    options.publicURL = try arguments.option("--public-url") ?? env["LARDER_PUBLIC_URL"]
    let origins = try arguments.options("--cors-origin")
    if !origins.isEmpty { options.corsOrigins = origins }
    options.publicKeyFiles = try arguments.options("--public-key").map { URL(fileURLWithPath: $0) }
    options.jwtIssuer = try arguments.option("--jwt-issuer")
    options.jwtAudience = try arguments.option("--jwt-audience")
    switch try arguments.option("--access-log") ?? "-" {
    case "-": options.http.accessLog = .standardError
    case "off": options.http.accessLog = .disabled
    case let path: options.http.accessLog = .file(path)
    }
    _ = try arguments.finish(positionals: 0...0)
  }

  func run() throws {
    let service = try LarderService(options: options)
    try service.start()
    if allowAll {
      Output.note(
        """
        ************************************************************************
        WARNING: --allow-all: every request is allowed, with or without a token.
        Do not expose this server. Use --rules FILE for real access control.
        ************************************************************************
        """)
    }
    let recovery = service.larder.recovery
    if recovery.tempFilesRemoved + recovery.trashRestored + recovery.trashRemoved > 0 {
      Output.note(
        "recovered: \(recovery.tempFilesRemoved) temp files removed, \(recovery.trashRestored) blobs restored from trash, \(recovery.trashRemoved) trash entries removed"
      )
    }
    let host = options.http.host.contains(":") ? "[\(options.http.host)]" : options.http.host
    // Unbuffered, so a script reading our stdout sees the line at once.
    FileHandle.standardOutput.write(Data("listening on http://\(host):\(service.port)\n".utf8))

    // Signals are handled on a dispatch queue, not in a signal handler.
    let done = DispatchSemaphore(value: 0)
    var sources: [DispatchSourceSignal] = []
    for sig in [SIGTERM, SIGINT] {
      signal(sig, SIG_IGN)
      let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
      source.setEventHandler { done.signal() }
      source.resume()
      sources.append(source)
    }
    signal(SIGHUP, SIG_IGN)
    let hup = DispatchSource.makeSignalSource(signal: SIGHUP, queue: .global())
    hup.setEventHandler { for line in service.reload() { Output.note(line) } }
    hup.resume()
    sources.append(hup)
    done.wait()
    Output.note("larder: shutting down; waiting for in-flight requests")
    let clean = service.stop(timeout: .seconds(30))
    Output.note(clean ? "larder: stopped" : "larder: stopped with requests still in flight after 30 s")
    _ = sources
  }
}
