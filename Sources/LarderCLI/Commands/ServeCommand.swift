import Dispatch
import Foundation
import Larder
import LarderServer
import LarderWebhooks

struct ServeCommand: Command {
  static let host = Option.value(
    "--host", "HOST", default: "127.0.0.1", environment: "LARDER_HOST", help: "the address to bind")
  static let port = Option.value(
    "--port", "PORT", default: "8080", environment: "LARDER_PORT",
    help: "the port to bind; 0 binds any free port, printed as:\nlistening on http://HOST:PORT")
  static let rules = Option.value(
    "--rules", "FILE", environment: "LARDER_RULES",
    help: "storage.rules to enforce (default deny); SIGHUP reloads it")
  static let allowAll = Option.flag(
    "--allow-all", environment: "LARDER_ALLOW_ALL", help: "no access control at all: development only")
  static let maxUploadSize = Option.value(
    "--max-upload-size", "SIZE", default: "5GiB", environment: "LARDER_MAX_UPLOAD_SIZE",
    help: "the largest object an upload may create")
  static let uploadLease = Option.value(
    "--upload-lease", "DURATION", default: "10s", environment: "LARDER_UPLOAD_LEASE",
    help: "with --blobs s3://…: how long a node that died mid-upload\nblocks other nodes from continuing it")
  static let catalogWriters = Option.value(
    "--catalog-writers", "N", default: "8", environment: "LARDER_CATALOG_WRITERS",
    help: "with a PostgreSQL catalog: writer connections at most, 1…256\n(writes of different contents and names commit together)")
  static let threads = Option.value(
    "--threads", "N", environment: "LARDER_THREADS",
    help: "request threads, 1…256; default: the number of cores")
  static let publicURL = Option.value(
    "--public-url", "URL", environment: "LARDER_PUBLIC_URL",
    help: "the URL clients reach the server at, for tus Locations and /token's audience; default: relative Locations, the address listened on")
  static let imageTransforms = Option.value(
    "--image-transforms", "on|off", default: "on", environment: "LARDER_IMAGE_TRANSFORMS",
    help: "image variants on downloads (width, height, resize, format, quality)")
  static let imageMaxPixels = Option.value(
    "--image-max-pixels", "N", default: "50000000", environment: "LARDER_IMAGE_MAX_PIXELS",
    help: "sources whose header says more pixels are refused (422) before decoding")
  static let imageMaxSourceSize = Option.value(
    "--image-max-source-size", "SIZE", default: "25MiB", environment: "LARDER_IMAGE_MAX_SOURCE_SIZE",
    help: "larger sources are not transformed (413)")
  static let imageCacheSize = Option.value(
    "--image-cache-size", "SIZE", default: "1GiB", environment: "LARDER_IMAGE_CACHE_SIZE",
    help: "the LRU budget of cached variants (0: keep none; larger variants are served, not kept)")
  static let imageVariantsPerSource = Option.value(
    "--image-variants-per-source", "N", default: "32", environment: "LARDER_IMAGE_VARIANTS_PER_SOURCE",
    help: "variants kept per source image; one more releases its least recently used")
  static let imageSizes = Option.value(
    "--image-sizes", "W,W,…", environment: "LARDER_IMAGE_SIZES",
    help: "the only widths and heights rendered (others snap to the nearest); default: any")
  static let imageRendersPerClient = Option.value(
    "--image-renders-per-client", "N", environment: "LARDER_IMAGE_RENDERS_PER_CLIENT",
    help: "renders one identity or address may have in progress (429 past it);\ndefault: half of --threads, 1…4")
  static let imageThreads = Option.value(
    "--image-threads", "N", environment: "LARDER_IMAGE_THREADS",
    help: "render threads (never the request threads), 1…64; default: the number of cores")
  static let writeQuota = Option.value(
    "--write-quota", "SIZE", default: "10GiB", environment: "LARDER_WRITE_QUOTA",
    help: "bytes one identity (user, or anonymous address) may write\nper --write-quota-period; 0: unlimited (admin identities always are)")
  static let writeQuotaPeriod = Option.value(
    "--write-quota-period", "DURATION", default: "1h", environment: "LARDER_WRITE_QUOTA_PERIOD",
    help: "the period of --write-quota (the bucket refills over it)")
  static let uploadsInProgress = Option.value(
    "--uploads-in-progress", "N", default: "1000", environment: "LARDER_UPLOADS_IN_PROGRESS",
    help: "resumable uploads one identity may have in progress; 0: unlimited")
  static let eventDelivery = Option.value(
    "--event-delivery", "on|off", default: "on", environment: "LARDER_EVENT_DELIVERY",
    help: "whether this node delivers object-change events to webhooks\n(off: other nodes sharing the catalog deliver them)")
  static let eventTimeout = Option.value(
    "--event-timeout", "DURATION", default: "10s", environment: "LARDER_EVENT_TIMEOUT",
    help: "one webhook request's limit; longer is a failed attempt")
  static let eventRetryFirst = Option.value(
    "--event-retry-first", "DURATION", default: "10s", environment: "LARDER_EVENT_RETRY_FIRST",
    help: "the wait after a failed delivery, doubling each time")
  static let eventRetryMax = Option.value(
    "--event-retry-max", "DURATION", default: "10m", environment: "LARDER_EVENT_RETRY_MAX",
    help: "the longest wait between attempts")
  static let eventGiveUp = Option.value(
    "--event-give-up", "DURATION", default: "24h", environment: "LARDER_EVENT_GIVE_UP",
    help: "a delivery still failing this long after its event is dead-lettered")
  static let eventRetention = Option.value(
    "--event-retention", "DURATION", default: "7d", environment: "LARDER_EVENT_RETENTION",
    help: "how long delivered events stay in the outbox")
  static let consoleBuckets = Option.value(
    "--console-buckets", "BUCKET,…", default: "app", environment: "LARDER_CONSOLE_BUCKETS",
    help: "the buckets the web console offers users (admin identities see every bucket)")
  static let corsOrigin = Option.repeated(
    "--cors-origin", "ORIGIN", help: "an origin browsers may call from; default: any")
  static let publicKey = Option.repeated(
    "--public-key", "FILE",
    help: "PEM public key or JWKS file for RS256/ES256 tokens\n(HS256 tokens use the catalog's token_secret)")
  static let jwtIssuer = Option.value("--jwt-issuer", "ISS", help: "the `iss` tokens must carry")
  static let jwtAudience = Option.value("--jwt-audience", "AUD", help: "the `aud` tokens must carry")
  static let connectionMemoryLimit = Option.value(
    "--connection-memory-limit", "SIZE", default: "64KiB",
    help: "memory per connection for headers and buffers")
  static let connectionTimeout = Option.value(
    "--connection-timeout", "SECONDS", default: "60", help: "close a connection idle this long")
  static let accessLog = Option.value(
    "--access-log", "FILE|-|off", default: "-", help: "where the access log goes (- is standard error)")
  static let connectionLimit = Option.value(
    "--connection-limit", "N", default: "1024", help: "open connections at most, 1…1000000")
  static let perIPConnectionLimit = Option.value(
    "--per-ip-connection-limit", "N", default: "64", help: "open connections per client address (0: no limit)")

  static let configuration = CommandConfiguration(
    name: "serve", summary: "run the HTTP service",
    discussion: """
      SIGTERM or SIGINT: stop accepting, finish in-flight requests (up to 30 s), close the catalog.
      """,
    options: [
      host, port, rules, allowAll, maxUploadSize, uploadLease, catalogWriters, threads, publicURL, corsOrigin, publicKey, jwtIssuer,
      jwtAudience, connectionMemoryLimit, connectionTimeout, accessLog, connectionLimit, perIPConnectionLimit,
      imageTransforms, imageMaxPixels, imageMaxSourceSize, imageCacheSize, imageThreads,
      writeQuota, writeQuotaPeriod, uploadsInProgress,
      imageVariantsPerSource, imageSizes, imageRendersPerClient,
      eventDelivery, eventTimeout, eventRetryFirst, eventRetryMax, eventGiveUp, eventRetention, consoleBuckets,
    ],
    exclusive: [
      ExclusiveOptions(
        [rules, allowAll],
        missing:
          "no access policy: pass --rules FILE (e.g. --rules storage.rules.example), or --allow-all for an open development server"
      )
    ],
    groups: [StoreOptions.self])

  var store: StoreOptions
  var options: LarderService.Options
  var allowAll: Bool

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    let port = try Self.integer(arguments.value(Self.port)!, in: 0...65535, else: "--port must be 0…65535")
    // Exactly one of them is given: the parser checked the configuration's exclusive set.
    allowAll = arguments.flag(Self.allowAll)
    options = LarderService.Options(
      dataDirectory: store.data.directory,
      policy: allowAll ? .allowAll : .rulesFile(URL(fileURLWithPath: arguments.value(Self.rules)!)))
    options.catalog = store.catalog
    options.blobs = store.blobs
    // The executable composes the server: every backend, and webhooks over libcurl.
    options.backends = StoreOptions.backends
    options.catalogWriters = try Self.integer(
      arguments.value(Self.catalogWriters)!, in: 1...256, else: "--catalog-writers must be 1…256")
    options.faults = store.faults
    options.http.host = arguments.value(Self.host)!
    options.http.port = port
    options.maxUploadSize = try parseSize(arguments.value(Self.maxUploadSize)!)
    options.uploadLease = try parseDuration(arguments.value(Self.uploadLease)!)
    options.images = try Self.imageOptions(arguments)
    options.quota = try Self.quota(arguments)
    options.events = try Self.eventOptions(arguments)
    options.events.transport = CurlWebhookTransport()
    guard options.uploadLease >= .seconds(1) else { throw UsageError("--upload-lease must be at least 1s") }
    if let text = arguments.value(Self.threads) {
      options.http.threadPoolSize = try Self.integer(text, in: 1...256, else: "--threads must be 1…256")
    }
    options.http.connectionMemoryLimit = Int(try parseSize(arguments.value(Self.connectionMemoryLimit)!))
    options.http.connectionTimeout = try Self.integer(
      arguments.value(Self.connectionTimeout)!, in: 0...Int.max, else: "--connection-timeout takes seconds")
    options.http.connectionLimit = try Self.integer(
      arguments.value(Self.connectionLimit)!, in: 1...1_000_000, else: "--connection-limit must be 1…1000000")
    options.http.perIPConnectionLimit = try Self.integer(
      arguments.value(Self.perIPConnectionLimit)!, in: 0...Int.max, else: "--per-ip-connection-limit must be 0 (none) or more")
    options.publicURL = arguments.value(Self.publicURL)
    options.consoleBuckets = try Self.consoleBuckets(arguments.value(Self.consoleBuckets)!)
    let origins = arguments.values(Self.corsOrigin)
    if !origins.isEmpty { options.corsOrigins = origins }
    options.publicKeyFiles = arguments.values(Self.publicKey).map { URL(fileURLWithPath: $0) }
    options.jwtIssuer = arguments.value(Self.jwtIssuer)
    options.jwtAudience = arguments.value(Self.jwtAudience)
    switch arguments.value(Self.accessLog)! {
    case "-": options.http.accessLog = .standardError
    case "off": options.http.accessLog = .disabled
    case let path: options.http.accessLog = .file(path)
    }
  }

  /// `--console-buckets`: bucket names, comma-separated, each one the store accepts.
  static func consoleBuckets(_ text: String) throws(UsageError) -> [String] {
    let names = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
    guard !names.isEmpty else { throw UsageError("--console-buckets needs at least one bucket name") }
    for name in names {
      do { try ObjectName.validateBucket(name) } catch {
        throw UsageError("--console-buckets: \(error.description)")
      }
    }
    return names
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

extension ServeCommand {
  /// `text` as an integer within `range`, else the usage error `message`.
  static func integer<N: FixedWidthInteger>(_ text: String, in range: ClosedRange<N>, else message: String)
    throws(UsageError) -> N
  {
    guard let n = N(text), range.contains(n) else { throw UsageError(message) }
    return n
  }

  /// `--write-quota`, `--write-quota-period`, `--uploads-in-progress`.
  static func quota(_ arguments: ParsedArguments) throws(UsageError) -> WriteQuota {
    let period = try parseDuration(arguments.value(writeQuotaPeriod)!)
    guard period >= .seconds(1) else { throw UsageError("--write-quota-period must be at least 1s") }
    return WriteQuota(
      bytesPerPeriod: try parseSize(arguments.value(writeQuota)!), period: period,
      uploadsInProgress: try integer(
        arguments.value(uploadsInProgress)!, in: 0...Int.max, else: "--uploads-in-progress must be 0 (none) or more"))
  }

  /// `--event-*`: the webhook deliverer's settings.
  static func eventOptions(_ arguments: ParsedArguments) throws(UsageError) -> EventDeliveryOptions {
    var events = EventDeliveryOptions()
    switch arguments.value(eventDelivery)! {
    case "on": events.enabled = true
    case "off": events.enabled = false
    default: throw UsageError("--event-delivery must be on or off")
    }
    events.timeout = try parseDuration(arguments.value(eventTimeout)!)
    guard events.timeout > .zero else { throw UsageError("--event-timeout must be more than 0") }
    events.retry.firstDelay = try parseDuration(arguments.value(eventRetryFirst)!)
    guard events.retry.firstDelay > .zero else { throw UsageError("--event-retry-first must be more than 0") }
    events.retry.maxDelay = try parseDuration(arguments.value(eventRetryMax)!)
    guard events.retry.maxDelay >= events.retry.firstDelay else {
      throw UsageError("--event-retry-max must be at least --event-retry-first")
    }
    events.retry.giveUpAfter = try parseDuration(arguments.value(eventGiveUp)!)
    events.retention = try parseDuration(arguments.value(eventRetention)!)
    return events
  }

  /// `--image-*`: nil when `--image-transforms off`.
  static func imageOptions(_ arguments: ParsedArguments) throws(UsageError) -> ImageOptions? {
    switch arguments.value(imageTransforms)! {
    case "off": return nil
    case "on": break
    default: throw UsageError("--image-transforms must be on or off")
    }
    var images = ImageOptions()
    images.limits.maxPixels = try integer(
      arguments.value(imageMaxPixels)!, in: 1...Int64.max, else: "--image-max-pixels must be a positive integer")
    images.limits.maxSourceBytes = try parseSize(arguments.value(imageMaxSourceSize)!)
    images.limits.cacheBytes = try parseSize(arguments.value(imageCacheSize)!)
    images.limits.variantsPerSource = try integer(
      arguments.value(imageVariantsPerSource)!, in: 1...100_000, else: "--image-variants-per-source must be 1…100000")
    if let text = arguments.value(imageSizes) {
      let max = images.limits.maxDimension
      var sizes: [Int] = []
      for part in text.split(separator: ",", omittingEmptySubsequences: false) {
        sizes.append(
          try integer(
            part.trimmingCharacters(in: .whitespaces), in: 1...max,
            else: "--image-sizes takes widths and heights 1…\(max), comma-separated"))
      }
      images.limits.sizes = sizes
    }
    if let text = arguments.value(imageRendersPerClient) {
      images.rendersPerClient = try integer(text, in: 1...1024, else: "--image-renders-per-client must be 1…1024")
    }
    if let text = arguments.value(imageThreads) {
      images.renderThreads = try integer(text, in: 1...64, else: "--image-threads must be 1…64")
    }
    return images
  }
}
