import Foundation
import LarderTestSupport
import Larder
import Testing

/// put / get / ls / stat / rm through the real `larder` binary, on a real data directory.
@Suite struct ObjectCommandTests {
  @Test func putThenGetReturnsExactBytesForEverySize() throws {
    let box = try Sandbox()
    let contents: [(String, [UInt8])] = [
      ("empty", []), ("one", [0x00]), ("small", Array("hello, larder\n".utf8)),
      ("chunk-plus-one", pseudoRandomBytes((1 << 20) + 1, seed: 1)),
    ]
    for (name, bytes) in contents {
      let src = try box.write(name, bytes)
      let put = try box.larder("put", src, "bkt/dir/\(name)")
      #expect(put.status == 0, "\(put)")
      let sha = try CLI.opensslSHA256(src)
      #expect(put.stdout.hasPrefix("bkt/dir/\(name)  \(bytes.count) bytes  "), "\(put)")
      #expect(put.stdout.hasSuffix("  sha256:\(sha)\n"), "\(put)")
      // To standard output.
      let get = try box.larder("get", "bkt/dir/\(name)")
      #expect(get.status == 0, "\(get)")
      #expect(get.stdoutBytes == bytes)
      #expect(get.stderr == "")
      // To a file, via -o and via --output.
      let out = box.path("out-\(name)")
      let getFile = try box.larder("get", "bkt/dir/\(name)", "-o", out)
      #expect(getFile.status == 0, "\(getFile)")
      #expect(getFile.stdoutBytes == [])
      #expect(box.read("out-\(name)") == bytes)
      #expect(!FileManager.default.fileExists(atPath: out + ".larder-partial"))
      #expect(try CLI.opensslSHA256(out) == sha)
      let long = try box.larder("get", "bkt/dir/\(name)", "--output=\(out)2")
      #expect(long.status == 0 && box.read("out-\(name)2") == bytes)
    }
  }

  @Test func putWithoutContentTypeDeclaresTheDetectedType() throws {
    let box = try Sandbox()
    let src = try box.write("photo", onePixelPNG)
    let put = try box.larder("put", src, "bkt/media/photo.png", "--json")
    #expect(put.status == 0, "\(put)")
    let json = try put.jsonObject()
    #expect(json["contentType"] as? String == "image/png")
    #expect(json["detectedContentType"] as? String == "image/png")
    // An explicit --content-type still wins.
    let declared = try box.larder("put", src, "bkt/media/photo.bin", "--content-type", "application/x-mine", "--json")
    #expect(try declared.jsonObject()["contentType"] as? String == "application/x-mine")
  }

  @Test func putFromStandardInput() throws {
    let box = try Sandbox()
    let bytes = pseudoRandomBytes(300_001, seed: 2)
    let put = try box.larder("put", "-", "bkt/from-stdin.bin", "--json", stdin: bytes)
    #expect(put.status == 0, "\(put)")
    let json = try put.jsonObject()
    #expect(json["size"] as? String == "300001")
    #expect(json["sha256"] as? String == (try CLI.opensslSHA256(box.write("expected", bytes))))
    let get = try box.larder("get", "bkt/from-stdin.bin", "-o", "-")
    #expect(get.status == 0)
    #expect(get.stdoutBytes == bytes)
    // Standard input that is empty stores an empty object.
    let empty = try box.larder("put", "-", "bkt/empty", stdin: [])
    #expect(empty.status == 0, "\(empty)")
    #expect(try box.larder("get", "bkt/empty").stdoutBytes == [])
  }

  @Test func jsonMetadataHasFirebaseFieldsSniffedAndDeclaredTypes() throws {
    let box = try Sandbox()
    let src = try box.write("pixel.png", onePixelPNG)
    let put = try box.larder(
      "put", src, "app/users/u1/pixel.png", "--content-type", "text/plain", "--metadata", "owner=alice",
      "--metadata", "expr=a=b", "--json")
    #expect(put.status == 0, "\(put)")
    let json = try put.jsonObject()
    #expect(json["name"] as? String == "users/u1/pixel.png")
    #expect(json["bucket"] as? String == "app")
    #expect(json["size"] as? String == String(onePixelPNG.count))
    #expect(json["sha256"] as? String == (try CLI.opensslSHA256(src)))
    #expect(json["md5Hash"] as? String == (try CLI.opensslMD5Base64(src)))
    #expect(json["contentType"] as? String == "text/plain")
    #expect(json["detectedContentType"] as? String == "image/png")
    #expect(json["declaredContentType"] == nil)
    #expect(json["metadata"] as? [String: String] == ["owner": "alice", "expr": "a=b"])
    // Generations are microsecond timestamps, as Firebase's are.
    let generation = try #require(Int64(json["generation"] as? String ?? ""))
    #expect(generation > 1_600_000_000_000_000)
    #expect(json["metageneration"] as? String == "1")
    #expect(json["contentEncoding"] as? String == "identity")

    // stat --json shows the same resource.
    let stat = try box.larder("stat", "app/users/u1/pixel.png", "--json")
    #expect(stat.status == 0)
    let statJSON = try stat.jsonObject()
    let putJSON = json
    // Times are truncated to the stored millisecond before they are returned, so they match exactly.
    #expect(NSDictionary(dictionary: statJSON) == NSDictionary(dictionary: putJSON))

    // The text form names the same values.
    let text = try box.larder("stat", "app/users/u1/pixel.png")
    #expect(text.status == 0)
    #expect(text.stdoutLines.contains("name:           app/users/u1/pixel.png"))
    #expect(text.stdoutLines.contains("size:           \(onePixelPNG.count)"))
    #expect(text.stdoutLines.contains("contentType:    text/plain"))
    #expect(text.stdoutLines.contains("detectedType:   image/png"))
    #expect(text.stdoutLines.contains("metadata.owner: alice"))
    #expect(text.stdoutLines.contains("metadata.expr:  a=b"))

    // New content under the same name bumps the generation.
    let again = try box.larder(
      "put", try box.write("text", Array("plain words\n".utf8)), "app/users/u1/pixel.png", "--json")
    let second = try again.jsonObject()
    #expect(try #require(Int64(second["generation"] as? String ?? "")) > generation)
    #expect(second["metageneration"] as? String == "1")
    // Nothing declared: the CLI declares what libmagic found.
    #expect(second["contentType"] as? String == "text/plain")
    #expect(second["detectedContentType"] as? String == "text/plain")
    #expect(second["declaredContentType"] == nil)
    #expect(second["metadata"] == nil)
  }

  static func parseTimestamp(_ text: String?) -> Date? {
    guard let text else { return nil }
    return try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
  }

  @Test func listFoldsAtSlashUnlessRecursive() throws {
    let box = try Sandbox()
    for name in ["top.txt", "a/x.txt", "a/c.txt", "a/b/y.txt"] {
      try box.put("bkt/\(name)", Array("12345".utf8))
    }
    try box.put("other/z", [1])

    let root = try box.larder("ls", "bkt", "--json").jsonObject()
    #expect(root["prefixes"] as? [String] == ["a/"])
    #expect((root["items"] as? [[String: Any]])?.map { $0["name"] as? String } == ["top.txt"])

    let inA = try box.larder("ls", "bkt/a/", "--json").jsonObject()
    #expect(inA["prefixes"] as? [String] == ["a/b/"])
    #expect((inA["items"] as? [[String: Any]])?.map { $0["name"] as? String } == ["a/c.txt", "a/x.txt"])

    let all = try box.larder("ls", "bkt", "--recursive", "--json").jsonObject()
    #expect(all["prefixes"] as? [String] == [])
    #expect(
      (all["items"] as? [[String: Any]])?.map { $0["name"] as? String } == [
        "a/b/y.txt", "a/c.txt", "a/x.txt", "top.txt",
      ])
    #expect((all["items"] as? [[String: Any]])?.map { $0["size"] as? String } == ["5", "5", "5", "5"])

    // Text: prefixes first, then name TAB size TAB type TAB updated.
    let text = try box.larder("ls", "bkt")
    #expect(text.status == 0)
    #expect(text.stdoutLines.count == 2)
    #expect(text.stdoutLines.first == "a/")
    // The type column is the object's contentType: the declared type, here the detected one.
    #expect(text.stdoutLines.last?.hasPrefix("top.txt\t5\t") == true)
    #expect(
      try box.larder("ls", "bkt", "-r").stdoutLines.map { String($0.split(separator: "\t")[0]) } == [
        "a/b/y.txt", "a/c.txt", "a/x.txt", "top.txt",
      ])

    // Without a target: the buckets and their object counts.
    let buckets = try box.larder("ls", "--json")
    #expect(buckets.status == 0)
    #expect(
      (try buckets.json() as? [[String: String]]) == [
        ["bucket": "bkt", "objects": "4"], ["bucket": "other", "objects": "1"],
      ])
    #expect(try box.larder("ls").stdoutLines == ["bkt/\t4 objects", "other/\t1 objects"])
    // An empty prefix lists nothing, successfully.
    let none = try box.larder("ls", "bkt/nothing-here/", "--json").jsonObject()
    #expect(none["items"] as? [[String: Any]] != nil && (none["items"] as? [[String: Any]])!.isEmpty)
  }

  @Test func getOverMaxSizeFailsBeforeWritingAnything() throws {
    let box = try Sandbox()
    let bytes = pseudoRandomBytes(1000, seed: 3)
    try box.put("bkt/k", bytes)
    let out = box.path("out.bin")
    let refused = try box.larder("get", "bkt/k", "-o", out, "--max-size", "999")
    #expect(refused.status == 1)
    #expect(
      refused.stderr
        == "larder: error: content is 1000 bytes, larger than the maximum of 999 bytes allowed for this download\n"
    )
    #expect(!FileManager.default.fileExists(atPath: out))
    #expect(!FileManager.default.fileExists(atPath: out + ".larder-partial"))
    // To stdout: nothing written either.
    let toStdout = try box.larder("get", "bkt/k", "--max-size=999")
    #expect(toStdout.status == 1 && toStdout.stdoutBytes.isEmpty)
    // Exactly the size is allowed; units are understood.
    let exact = try box.larder("get", "bkt/k", "-o", out, "--max-size", "1000")
    #expect(exact.status == 0 && box.read("out.bin") == bytes)
    #expect(try box.larder("get", "bkt/k", "--max-size", "1KiB").stdoutBytes == bytes)
    #expect(try box.larder("get", "bkt/k", "--max-size", "1KB").stdoutBytes == bytes)
  }

  @Test func getToAFullDeviceFailsWithOneClearLine() throws {
    let box = try Sandbox()
    try box.put("bkt/k", pseudoRandomBytes(3000, seed: 4))
    // /dev/full answers every write with ENOSPC.
    let pid = try CLI.spawn(
      try CLI.binary(), ["get", "bkt/k", "--data", box.dataPath],
      stdoutPath: "/dev/full", stderrPath: box.path("err"))
    #expect(try CLI.wait(pid) == 1)
    let stderr = (try? String(contentsOfFile: box.path("err"), encoding: .utf8)) ?? ""
    #expect(stderr == "larder: error: cannot write the output: No space left on device\n")
  }

  @Test func removeThenStatAndGetReportNotFound() throws {
    let box = try Sandbox()
    try box.put("bkt/gone.txt", Array("bye".utf8))
    let rm = try box.larder("rm", "bkt/gone.txt")
    #expect(rm.status == 0 && rm.stdout == "" && rm.stderr == "")
    let stat = try box.larder("stat", "bkt/gone.txt")
    #expect(stat.status == 1)
    #expect(stat.stderr == "larder: error: object 'gone.txt' not found in bucket 'bkt'\n")
    #expect(stat.stdout == "")
    let get = try box.larder("get", "bkt/gone.txt", "-o", box.path("x"))
    #expect(get.status == 1)
    #expect(get.stderr == "larder: error: object 'gone.txt' not found in bucket 'bkt'\n")
    #expect(!FileManager.default.fileExists(atPath: box.path("x")))
    let again = try box.larder("rm", "bkt/gone.txt")
    #expect(again.status == 1)
    #expect(again.stderr == "larder: error: object 'gone.txt' not found in bucket 'bkt'\n")
    #expect(try box.larder("ls", "bkt", "-r", "--json").jsonObject()["items"] as? [Any] != nil)
    #expect((try box.larder("ls", "bkt", "-r", "--json").jsonObject()["items"] as? [Any])?.count == 0)
  }

  @Test func dataDirectoryFromEnvironment() throws {
    let box = try Sandbox()
    let src = try box.write("f", Array("env".utf8))
    let put = try CLI.larder(["put", src, "bkt/env.txt"], environment: ["LARDER_DATA": box.dataPath])
    #expect(put.status == 0, "\(put)")
    #expect(try box.larder("get", "bkt/env.txt").stdoutBytes == Array("env".utf8))
    // The library sees what the CLI wrote.
    let larder = try TestStore.open(at: box.data)
    #expect(
      try larder.files.data(of: try larder.objects.get(bucket: "bkt", name: "env.txt").file) == Data("env".utf8)
    )
  }

  @Test func missingSourceFileIsAFailureNotUsage() throws {
    let box = try Sandbox()
    let missing = box.path("does-not-exist")
    let put = try box.larder("put", missing, "bkt/x")
    #expect(put.status == 1)
    #expect(put.stderr == "larder: error: cannot open \(missing): No such file or directory\n")
    #expect(try box.larder("stat", "bkt/x").status == 1)
  }
}
