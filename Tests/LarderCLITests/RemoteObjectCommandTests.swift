import Foundation
import LarderTestSupport
import Testing

/// `larder --server URL --key KEY.json put|get|ls|stat|rm|cp`: the object commands against a live
/// `larder serve` (real processes, port 0) whose rules deny everyone, with a key made by
/// `larder service-account create` (an admin identity: the rules do not apply to it).
@Suite struct RemoteObjectCommandTests {
  /// A server that refuses every request but a service account's, and a key for it.
  struct Remote {
    let box: Sandbox
    var server: ServedLarder
    let key: String

    init() throws {
      box = try Sandbox()
      let rules = try box.write(
        "deny.rules",
        Array(
          """
          rules_version = '2';
          service firebase.storage {
            match /b/{bucket}/o {
              match /{allPaths=**} { allow read, write: if false; }
            }
          }
          """.utf8))
      server = try ServedLarder(box, policy: ["--rules", rules])
      key = box.path("ops.json")
      let made = try CLI.larder(
        [
          "service-account", "create", "ops", "--data", box.dataPath, "--public-url", server.url, "--output",
          key,
        ])
      guard made.status == 0 else { throw HarnessFailure("service-account create: \(made)") }
    }

    /// `larder --server URL --key KEY ARGS…` (the options before the command, as gsutil's are).
    func larder(_ arguments: String..., environment: [String: String] = [:], stdin: [UInt8]? = nil) throws
      -> RunResult
    {
      try CLI.larder(
        ["--server", server.url, "--key", key] + arguments,
        environment: ["XDG_STATE_HOME": box.path("state")].merging(environment) { $1 }, stdin: stdin)
    }
  }

  @Test func putGetStatListCopyRemoveRoundTripExactBytes() throws {
    var remote = try Remote()
    defer { remote.server.kill() }
    let box = remote.box
    let small = pseudoRandomBytes(1000, seed: 11)
    let large = pseudoRandomBytes(9 << 20 + 123, seed: 12)  // over 8 MiB: a resumable session
    let smallFile = try box.write("small.bin", small)
    let largeFile = try box.write("large.bin", large)

    let put = try remote.larder("put", smallFile, "app/dir/small.bin")
    #expect(put.status == 0, "\(put)")
    #expect(put.stdout.hasPrefix("app/dir/small.bin  1000 bytes  application/octet-stream  md5:"), "\(put)")
    let putLarge = try remote.larder("put", largeFile, "app/dir/large.bin", "--content-type", "video/mp4")
    #expect(putLarge.status == 0, "\(putLarge)")
    #expect(putLarge.stdout.hasPrefix("app/dir/large.bin  \(large.count) bytes  video/mp4"), "\(putLarge)")
    // Nothing left to resume once it is done.
    #expect(
      ((try? FileManager.default.contentsOfDirectory(atPath: box.path("state/larder/uploads"))) ?? []).isEmpty
    )

    #expect(try remote.larder("get", "app/dir/small.bin").stdoutBytes == small)
    let out = box.path("large.out")
    let get = try remote.larder("get", "app/dir/large.bin", "-o", out)
    #expect(get.status == 0, "\(get)")
    #expect(try CLI.opensslSHA256(out) == (try CLI.opensslSHA256(largeFile)))
    let ranged = try remote.larder("get", "app/dir/large.bin", "--range", "8388600-8388615")
    #expect(ranged.stdoutBytes == Array(large[8_388_600...8_388_615]), "\(ranged.stderr)")
    #expect(
      try remote.larder("get", "app/dir/small.bin", "--range", "-10").stdoutBytes == Array(small.suffix(10)))

    let stat = try remote.larder("stat", "app/dir/large.bin")
    #expect(stat.status == 0, "\(stat)")
    #expect(stat.stdoutLines.contains("name:           app/dir/large.bin"), "\(stat.stdout)")
    #expect(stat.stdoutLines.contains("size:           \(large.count)"))
    #expect(stat.stdoutLines.contains("contentType:    video/mp4"))
    #expect(stat.stdoutLines.contains("md5Hash:        \(try CLI.opensslMD5Base64(largeFile))"))
    #expect(stat.stdoutLines.contains("metageneration: 1"))
    let json = try remote.larder("stat", "app/dir/small.bin", "--json").jsonObject()
    #expect(json["kind"] as? String == "storage#object" && json["size"] as? String == "1000")

    #expect(try remote.larder("ls").stdoutLines == ["app/"])
    #expect(try remote.larder("ls", "app").stdoutLines == ["dir/"])
    let folder = try remote.larder("ls", "app/dir")
    #expect(
      folder.stdoutLines.map { String($0.split(separator: "\t")[0]) } == ["dir/large.bin", "dir/small.bin"])
    #expect(folder.stdoutLines.first?.split(separator: "\t").dropFirst().first == "\(large.count)")

    let copy = try remote.larder("cp", "app/dir/small.bin", "app/copy.bin")
    #expect(copy.status == 0, "\(copy)")
    #expect(try remote.larder("get", "app/copy.bin").stdoutBytes == small)
    #expect(try remote.larder("rm", "app/copy.bin").status == 0)
    let gone = try remote.larder("stat", "app/copy.bin")
    #expect(gone.status == 1)
    #expect(gone.stderrLines.count == 1 && gone.stderr.contains("404"), "\(gone)")

    // The environment names the server and the key as well.
    let viaEnvironment = try CLI.larder(
      ["ls", "app/dir/"], environment: ["LARDER_SERVER": remote.server.url, "LARDER_KEY": remote.key])
    #expect(viaEnvironment.stdoutLines.count == 2, "\(viaEnvironment)")
    // Without the key the rules judge an anonymous caller: refused.
    let anonymous = try CLI.larder(["ls", "app", "--server", remote.server.url])
    #expect(anonymous.status == 1 && anonymous.stderr.contains("403"), "\(anonymous)")
    // Standard input goes up too.
    let piped = try remote.larder("put", "-", "app/piped.txt", stdin: Array("from a pipe\n".utf8))
    #expect(piped.status == 0, "\(piped)")
    #expect(try remote.larder("get", "app/piped.txt").stdout == "from a pipe\n")
  }

  /// On a terminal (here `script`'s pseudo-terminal) a large transfer draws the CLI's progress bar.
  @Test func largeTransfersDrawTheProgressBarOnATerminal() throws {
    var remote = try Remote()
    defer { remote.server.kill() }
    let box = remote.box
    let file = try box.write("big.bin", pseudoRandomBytes(12 << 20, seed: 21))
    let binary = try CLI.binary()
    for command in [
      "\(binary) --server \(remote.server.url) --key \(remote.key) put \(file) app/big.bin",
      "\(binary) --server \(remote.server.url) --key \(remote.key) get app/big.bin -o \(box.path("back.bin"))",
    ] {
      let run = try CLI.run(
        "/usr/bin/script", ["-qec", command, "/dev/null"], environment: ["XDG_STATE_HOME": box.path("state")])
      #expect(run.status == 0, "\(run)")
      let verb = command.contains(" put ") ? "put" : "get"
      #expect(
        run.stdout.contains("\r\(verb) [##############################] 100% 12.0 MiB"),
        "\(run.stdout.debugDescription)")
    }
    #expect(try CLI.opensslSHA256(box.path("back.bin")) == (try CLI.opensslSHA256(file)))
  }

  @Test func folderGoesUpAndComesBackByPath() throws {
    var remote = try Remote()
    defer { remote.server.kill() }
    let box = remote.box
    let tree = box.path("tree")
    try FileManager.default.createDirectory(atPath: tree + "/sub/deeper", withIntermediateDirectories: true)
    let files = [
      "a.txt": Array("alpha\n".utf8), "sub/b.bin": pseudoRandomBytes(70_000, seed: 5),
      "sub/deeper/c.bin": pseudoRandomBytes(9 << 20, seed: 6),
    ]
    for (path, bytes) in files { _ = try box.write("tree/" + path, bytes) }
    let put = try remote.larder("put", tree, "app/backup")
    #expect(put.status == 0, "\(put)")
    #expect(put.stdoutLines.count == 3)
    let listed = try remote.larder("ls", "-r", "app/backup")
    #expect(
      listed.stdoutLines.map { String($0.split(separator: "\t")[0]) } == [
        "backup/a.txt", "backup/sub/b.bin", "backup/sub/deeper/c.bin",
      ])
    let back = box.path("restored")
    let get = try remote.larder("get", "-r", "app/backup", "-o", back)
    #expect(get.status == 0, "\(get)")
    for (path, bytes) in files {
      #expect(FileManager.default.contents(atPath: back + "/" + path).map(Array.init) == bytes, "\(path)")
    }
  }

  @Test func wrongKeyIsOneClearLine() throws {
    var remote = try Remote()
    defer { remote.server.kill() }
    // A key of another store, naming this server: its key id is unknown here.
    let other = try Sandbox()
    let stranger = other.path("stranger.json")
    #expect(
      try CLI.larder([
        "service-account", "create", "ops", "--data", other.dataPath, "--public-url", remote.server.url,
        "--output",
        stranger,
      ]).status == 0)
    let refused = try CLI.larder(["--server", remote.server.url, "--key", stranger, "ls", "app"])
    #expect(refused.status == 1)
    #expect(refused.stderrLines.count == 1, "\(refused)")
    #expect(
      refused.stderr.hasPrefix(
        "larder: error: \(remote.server.url)/token refused the key in \(stranger) (ops@larder.iam.larder): invalid_grant: "
      ),
      "\(refused)")
    // Not a key at all.
    let garbage = try remote.box.write("garbage.json", Array("{\"hello\": 1}".utf8))
    let notKey = try CLI.larder(["--server", remote.server.url, "--key", garbage, "ls"])
    #expect(notKey.status == 1)
    #expect(
      notKey.stderr
        == "larder: error: \(garbage) is not a service-account key file: its type is not service_account\n")
    // A key without a server is bad usage.
    let noServer = try CLI.larder(["ls", "--key", remote.key])
    #expect(noServer.status == 2)
    #expect(
      noServer.stderrLines.first
        == "larder: error: --key needs --server URL (the server to act on with the key)")
  }

  /// A 200 MiB upload killed midway, then the same command again: it continues from what the
  /// server holds (the session URI is remembered beside the source's identity), and the server
  /// receives less than the whole file the second time.
  @Test func interruptedLargeUploadResumesWhereTheServerStopped() throws {
    var remote = try Remote()
    defer { remote.server.kill() }
    let box = remote.box
    let size = 200 << 20
    let source = box.path("big.bin")
    // 1 MiB of pseudo-random bytes, each copy stamped with its index: fast to make, no two MiB alike.
    let block = pseudoRandomBytes(1 << 20, seed: 200)
    FileManager.default.createFile(atPath: source, contents: nil)
    let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: source))
    for i in 0..<200 {
      var copy = block
      withUnsafeBytes(of: UInt64(i).littleEndian) { copy.replaceSubrange(0..<8, with: $0) }
      try handle.write(contentsOf: copy)
    }
    try handle.close()
    let arguments = ["--server", remote.server.url, "--key", remote.key, "put", source, "app/big.bin"]
    let environment = ["XDG_STATE_HOME": box.path("state")]
    let pid = try CLI.spawn(
      try CLI.binary(), arguments, environment: environment, stdoutPath: box.path("first.out"),
      stderrPath: box.path("first.err"))
    var killed = false
    defer {
      if !killed {
        kill(pid, SIGKILL)
        _ = try? CLI.wait(pid, timeout: 30)
      }
    }
    // The session file appears before the first byte goes; wait until the server holds 16 MiB.
    let token = try CLI.larder(["service-account", "token", "ops", "--data", box.dataPath]).stdout
      .trimmingCharacters(in: .whitespacesAndNewlines)
    let deadline = Date().addingTimeInterval(120)
    var held = 0
    while held < 16 << 20 {
      guard Date() < deadline else { throw HarnessFailure("the upload never got 16 MiB to the server") }
      var status: Int32 = 0
      if waitpid(pid, &status, WNOHANG) == pid {
        killed = true
        throw HarnessFailure("the upload ended before it could be interrupted (status \(status))")
      }
      let sessions =
        (try? FileManager.default.contentsOfDirectory(atPath: box.path("state/larder/uploads"))) ?? []
      if let file = sessions.first(where: { $0.hasSuffix(".json") }),
        let data = FileManager.default.contents(atPath: box.path("state/larder/uploads/" + file)),
        let saved = try JSONSerialization.jsonObject(with: data) as? [String: Any],
        let session = saved["session"] as? String, let url = URL(string: session)
      {
        let target = url.path + "?" + (url.query ?? "")
        let answer = try remote.server.exchange(
          "PUT", target,
          headers: [("Authorization", "Bearer \(token)"), ("Content-Range", "bytes */\(size)")],
          body: [])
        if answer.status == 308, let range = answer.headers["range"],
          let last = Int(range.dropFirst("bytes=0-".count))
        {
          held = last + 1
        }
      }
      if held < 16 << 20 { usleep(20_000) }
    }
    kill(pid, SIGKILL)
    _ = try CLI.wait(pid, timeout: 30)
    killed = true
    #expect(try remote.larder("stat", "app/big.bin").status == 1, "not complete after the kill")

    let before = try Self.chunkBytesReceived(remote.server)
    let again = try CLI.larder(arguments, environment: environment)
    #expect(again.status == 0, "\(again)")
    #expect(again.stderr.contains("larder: resuming the upload of \(source) at "), "\(again.stderr)")
    let received = try Self.chunkBytesReceived(remote.server) - before
    #expect(
      received > 0 && received <= Int64(size - held), "the server received \(received) bytes the second time")

    // The download the same way: killed once the partial file holds 16 MiB, then run again.
    let out = box.path("big.out")
    let download = ["--server", remote.server.url, "--key", remote.key, "get", "app/big.bin", "-o", out]
    let getter = try CLI.spawn(
      try CLI.binary(), download, environment: environment, stdoutPath: box.path("get.out"),
      stderrPath: box.path("get.err"))
    var partial: Int64 = 0
    while partial < 16 << 20 {
      guard Date() < deadline.addingTimeInterval(120) else {
        throw HarnessFailure("the download never got 16 MiB")
      }
      var status: Int32 = 0
      if waitpid(getter, &status, WNOHANG) == getter {
        throw HarnessFailure("the download ended before it could be interrupted (status \(status))")
      }
      partial =
        (try? FileManager.default.attributesOfItem(atPath: out + ".larder-partial")[.size] as? Int64) ?? 0
      if partial < 16 << 20 { usleep(10_000) }
    }
    kill(getter, SIGKILL)
    _ = try CLI.wait(getter, timeout: 30)
    #expect(!FileManager.default.fileExists(atPath: out))
    partial =
      (try FileManager.default.attributesOfItem(atPath: out + ".larder-partial")[.size] as? Int64) ?? 0
    let sentBefore = try Self.downloadBytesSent(remote.server)
    let resumed = try CLI.larder(download, environment: environment)
    #expect(resumed.status == 0, "\(resumed)")
    #expect(resumed.stderr.contains("larder: resuming the download of app/big.bin at "), "\(resumed.stderr)")
    let sent = try Self.downloadBytesSent(remote.server) - sentBefore
    #expect(sent > 0 && sent <= Int64(size) - partial, "the server sent \(sent) bytes the second time")
    #expect(try CLI.opensslSHA256(out) == (try CLI.opensslSHA256(source)))
    #expect(!FileManager.default.fileExists(atPath: out + ".larder-partial"))
    #expect(
      ((try? FileManager.default.contentsOfDirectory(atPath: box.path("state/larder/downloads"))) ?? [])
        .isEmpty)
  }

  /// Response body bytes the server counted on downloads (`/metrics`).
  static func downloadBytesSent(_ server: ServedLarder) throws -> Int64 {
    try metric(server, "larder_http_response_body_bytes_total{route=\"gcs.objects.download\"}")
  }

  /// Request body bytes the server counted on resumable chunks (`/metrics`).
  static func chunkBytesReceived(_ server: ServedLarder) throws -> Int64 {
    try metric(server, "larder_http_request_body_bytes_total{route=\"gcs.upload.chunk\"}")
  }

  /// A counter of `/metrics`, once it stopped moving (a killed client's request is counted when
  /// the server has finished with it, which may be a moment after the kill).
  static func metric(_ server: ServedLarder, _ series: String) throws -> Int64 {
    func read() throws -> Int64 {
      let metrics = try server.exchange("GET", "/metrics")
      let line = metrics.text.split(separator: "\n").first { $0.hasPrefix(series + " ") }
      return line.flatMap { Int64($0.split(separator: " ").last ?? "") } ?? 0
    }
    var last = try read()
    for _ in 0..<50 {
      usleep(300_000)
      let now = try read()
      if now == last { return now }
      last = now
    }
    return last
  }
}
