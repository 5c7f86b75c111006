import Foundation
import Larder
import LarderTestSupport
import Testing

/// The traps a new user met in the CLI's first hour (issue 34, items 8 and 9), each checked on
/// the real binary and scripts.
@Suite struct FirstHourTests {
  @Test func versionIsOneLine() throws {
    for flag in ["--version", "-V"] {
      let result = try CLI.larder([flag])
      #expect(result.status == 0, "\(result)")
      #expect(result.stdoutLines.count == 1 && result.stdout.hasPrefix("larder "), "\(result)")
      #expect(result.stdout.dropFirst("larder ".count).first?.isNumber == true)
      #expect(result.stderr == "")
    }
  }

  @Test func listingAFolderNeedsNoTrailingSlash() throws {
    let box = try Sandbox()
    try box.put("app/users/dev/a.txt", Array("a".utf8))
    try box.put("app/users/dev/sub/b.txt", Array("b".utf8))
    try box.put("app/users/devices.txt", Array("c".utf8))
    let folder = try box.larder("ls", "app/users/dev")
    #expect(folder.status == 0, "\(folder)")
    #expect(
      folder.stdoutLines.map { String($0.split(separator: "\t")[0]) } == [
        "users/dev/sub/", "users/dev/a.txt",
      ])
    #expect(try box.larder("ls", "app/users/dev/").stdout == folder.stdout)
    let recursive = try box.larder("ls", "-r", "app/users/dev")
    #expect(
      recursive.stdoutLines.map { String($0.split(separator: "\t")[0]) } == [
        "users/dev/a.txt", "users/dev/sub/b.txt",
      ])
    // A prefix that is no folder still lists what starts with it.
    let partial = try box.larder("ls", "app/users/devi")
    #expect(partial.stdoutLines.map { String($0.split(separator: "\t")[0]) } == ["users/devices.txt"])
  }

  @Test func statLinesShareOneColumn() throws {
    let box = try Sandbox()
    try box.put(
      "app/k.txt", Array("k".utf8), extra: ["--metadata", "owner=ada", "--metadata", "a-much-longer-key=v"])
    let stat = try box.larder("stat", "app/k.txt")
    #expect(stat.status == 0, "\(stat)")
    let column = "metageneration: ".count
    for line in stat.stdoutLines {
      let colon = try #require(line.firstIndex(of: ":"), "\(line)")
      let label = line[...colon]
      if label.count < column {
        // Every value starts in the same column, after at least one space.
        #expect(line.dropFirst(label.count).prefix(column - label.count).allSatisfy { $0 == " " }, "\(line)")
        #expect(line.dropFirst(column).first != " ", "\(line)")
      } else {
        #expect(line.dropFirst(label.count).first == " ", "\(line)")
      }
    }
    #expect(stat.stdoutLines.contains("metageneration: 1"))
    #expect(stat.stdoutLines.contains("metadata.owner: ada"))
    #expect(stat.stdoutLines.contains("metadata.a-much-longer-key: v"))
    #expect(stat.stdoutLines.contains { $0.hasPrefix("crc32c:         ") })
  }

  @Test func aWriteDoesNotCreateABucketGCSWouldRefuse() throws {
    let box = try Sandbox()
    let file = try box.write("x.txt", Array("x".utf8))
    for bucket in ["a", "ab"] {
      let refused = try box.larder("put", file, "\(bucket)/x.txt")
      #expect(refused.status == 1, "\(refused)")
      #expect(
        refused.stderr
          == "larder: error: refusing to create the bucket '\(bucket)': it is shorter than 3 characters (bucket names are 3 to 63 lower-case letters, digits, '-', '_' and '.', as in GCS); did you mean BUCKET/\(bucket)/…?\n"
      )
    }
    let long = String(repeating: "b", count: 64)
    #expect(try box.larder("put", file, "\(long)/x.txt").stderr.contains("it is longer than 63 characters"))
    #expect(try box.larder("put", file, "abc/x.txt").status == 0)
    try box.put("abc/y.txt", [1])
    #expect(try box.larder("cp", "abc/y.txt", "z/y.txt").stderr.contains("refusing to create the bucket 'z'"))
    let listing = try box.larder("ls", "--json")
    #expect((try listing.json() as? [[String: String]])?.map { $0["bucket"] } == ["abc"])
    // A bucket that exists already (made through the API, say) keeps working.
    let larder = try TestStore.open(at: box.data)
    _ = try larder.objects.put(bucket: "b", name: "seed", data: Data("seed".utf8))
    #expect(try box.larder("put", file, "b/x.txt").status == 0)
  }

  @Test func getIntoAMissingFolderSaysSo() throws {
    let box = try Sandbox()
    try box.put("app/k.bin", [1, 2, 3])
    let target = box.path("no/such/folder/out.bin")
    let get = try box.larder("get", "app/k.bin", "-o", target)
    #expect(get.status == 1)
    #expect(
      get.stderr
        == "larder: error: cannot write \(target): the folder \(box.path("no/such/folder")) does not exist\n")
    #expect(!get.stderr.contains("larder-partial"))
  }

  @Test func putOfAFolderStoresItsFilesByPathAndGetBringsThemBack() throws {
    let box = try Sandbox()
    let tree = box.path("site")
    try FileManager.default.createDirectory(atPath: tree + "/css", withIntermediateDirectories: true)
    try box.write("site/index.html", Array("<h1>hi</h1>".utf8))
    try box.write("site/css/main.css", Array("h1{}".utf8))
    let put = try box.larder("put", tree, "web/www")
    #expect(put.status == 0, "\(put)")
    #expect(
      put.stdoutLines.map { String($0.split(separator: " ")[0]) } == [
        "web/www/css/main.css", "web/www/index.html",
      ])
    #expect(try box.larder("get", "web/www/index.html").stdout == "<h1>hi</h1>")
    let back = box.path("back")
    #expect(try box.larder("get", "-r", "web/www", "-o", back).status == 0)
    #expect(FileManager.default.contents(atPath: back + "/css/main.css") == Data("h1{}".utf8))
    #expect(FileManager.default.contents(atPath: back + "/index.html") == Data("<h1>hi</h1>".utf8))
  }

  @Test func serviceAccountCreateWritesNameDotJSONPrivately() throws {
    let box = try Sandbox()
    let cwd = box.path("here")
    try FileManager.default.createDirectory(atPath: cwd, withIntermediateDirectories: true)
    let made = try CLI.run(
      "/bin/sh",
      [
        "-c", "cd \"$1\" && exec \"$2\" service-account create ops --data \"$3\"", "sh", cwd,
        try CLI.binary(), box.dataPath,
      ])
    #expect(made.status == 0, "\(made)")
    #expect(made.stdout == "")
    #expect(!made.stderr.contains("PRIVATE"), "\(made.stderr)")
    let file = cwd + "/ops.json"
    let attributes = try FileManager.default.attributesOfItem(atPath: file)
    #expect((attributes[.posixPermissions] as? Int) == 0o600)
    let key = try #require(
      try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: file)))
        as? [String: String])
    #expect(key["client_email"] == "ops@larder.iam.larder")
    #expect(key["private_key"]?.hasPrefix("-----BEGIN PRIVATE KEY-----") == true)
    // Standard output is refused, never a key printed.
    let printed = try box.larder("service-account", "create", "other", "--output", "-")
    #expect(printed.status == 2 && printed.stdout == "", "\(printed)")
  }

  @Test(arguments: [("90s", 90), ("15m", 900), ("1h", 3600), ("7d", 604_800)])
  func tokenTTLTakesUnits(_ ttl: String, _ seconds: Int) throws {
    let box = try Sandbox()
    let token = try box.larder("token", "--uid", "u", "--ttl", ttl)
    #expect(token.status == 0, "\(token)")
    let payload = try #require(TokenAndRulesTests.base64URLDecode(token.stdout.split(separator: ".")[1]))
    let claims = try #require(try JSONSerialization.jsonObject(with: payload) as? [String: Any])
    let (iat, exp) = (claims["iat"] as? Int ?? -1, claims["exp"] as? Int ?? -1)
    #expect(exp - iat == seconds, "\(claims)")
  }

  // MARK: - make serve (item 9)

  @Test func serveDependenciesAreTheBuildsOnly() throws {
    let root = CLI.packageRoot.path
    let serve = try CLI.run(root + "/scripts/deps.sh", ["serve", "--print"])
    #expect(serve.status == 0, "\(serve)")
    let full = try CLI.run(root + "/scripts/deps.sh", ["--print"])
    for dev in [
      "pkg-config", "libsqlite3-dev", "libmagic-dev", "libssl-dev", "libre2-dev",
      "libpq-dev", "libcurl4-openssl-dev", "libvips-dev",
    ] {
      #expect(serve.stdoutLines.contains(dev), "\(dev)")
      #expect(full.stdoutLines.contains(dev), "\(dev)")
    }
    for heavy in [
      "postgresql", "swift-proxy", "chromium", "chromium-driver", "nodejs", "python3-venv", "rclone",
    ] {
      #expect(!serve.stdoutLines.contains(heavy), "\(heavy)")
      #expect(full.stdoutLines.contains(heavy), "\(heavy)")
    }
    // `make serve` runs the serve mode, never the full one (nor the virtualenv).
    let plan = try CLI.run("/usr/bin/make", ["-n", "-C", root, "serve"])
    #expect(plan.status == 0, "\(plan)")
    #expect(plan.stdoutLines.contains("scripts/deps.sh serve"), "\(plan.stdout)")
    #expect(!plan.stdoutLines.contains("scripts/deps.sh"), "\(plan.stdout)")
    #expect(!plan.stdout.contains("venv"))
  }

  @Test func serveScriptRefusesABusyPortBeforeAnyToken() throws {
    let box = try Sandbox()
    let (fd, port) = try Self.holdAPort()
    defer { close(fd) }
    let result = try CLI.run(
      CLI.packageRoot.path + "/scripts/serve.sh", [box.dataPath, String(port)],
      environment: ["LARDER_BIN": try CLI.binary()], timeout: 60)
    #expect(result.status == 1, "\(result)")
    #expect(
      result.stderr
        == "larder: error: port \(port) is in use (another larder serve?); choose another: make serve PORT=\(Int(port) + 1)\n"
    )
    #expect(result.stdout == "")
  }

  @Test func serveOnABusyPortIsOneLine() throws {
    let box = try Sandbox()
    let (fd, port) = try Self.holdAPort()
    defer { close(fd) }
    let result = try box.larder("serve", "--allow-all", "--port", String(port))
    #expect(result.status == 1, "\(result)")
    #expect(
      result.stderrLines.last
        == "larder: error: cannot bind 127.0.0.1:\(port): the port is in use (another larder serve?)",
      "\(result)")
    #expect(result.stdout == "")
  }

  /// A listening socket on 127.0.0.1, on any free port.
  static func holdAPort() throws -> (Int32, UInt16) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    try withUnsafeMutablePointer(to: &address) { pointer in
      try pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        guard bind(fd, $0, length) == 0, listen(fd, 4) == 0, getsockname(fd, $0, &length) == 0 else {
          close(fd)
          throw HarnessFailure("cannot hold a port: \(errno)")
        }
      }
    }
    return (fd, UInt16(bigEndian: address.sin_port))
  }

  @Test func keyFilesTheDocsCreateAreIgnoredAndCommittedJSONIsNot() throws {
    let root = CLI.packageRoot.path
    for name in ["ops.json", "backend.json", "upload.json"] {
      let ignored = try CLI.run("/usr/bin/git", ["-C", root, "check-ignore", "-q", name])
      #expect(ignored.status == 0, "\(name) is not ignored")
    }
    let tracked = try CLI.run("/usr/bin/git", ["-C", root, "ls-files", "*.json"])
    #expect(tracked.status == 0 && !tracked.stdoutLines.isEmpty, "\(tracked)")
    for path in tracked.stdoutLines {
      let check = try CLI.run("/usr/bin/git", ["-C", root, "check-ignore", "--no-index", "-q", path])
      #expect(check.status == 1, "\(path) would be ignored")
    }
  }
}
