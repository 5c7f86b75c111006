import Foundation
import LarderTestSupport
import Testing

/// An object whose bytes are gone from the blob store answers an error that says so, and the
/// read is counted in `/metrics` (issue 23: it was a bare `500 internal error`).
@Suite struct MissingContentTests {
  @Test(TestBlobs.filesystemOnly) func aDownloadOfMissingContentSaysSoAndIsCounted() throws {
    try withService { s in
      try s.upload("gone.txt", Array("bytes that will be lost".utf8))
      let files = s.blobFiles()
      #expect(files.count == 1)
      for file in files { try FileManager.default.removeItem(at: s.blobsDirectory.appendingPathComponent(file)) }

      let r = try s.send(.get("/v0/b/app/o/gone.txt?alt=media"))
      #expect(r.status == 500)
      let error = try #require(r.json?["error"] as? [String: Any])
      let message = try #require(error["message"] as? String)
      #expect(message.contains("is missing from the blob store"), "\(message)")
      #expect(message.contains("larder verify"), "\(message)")
      // The metadata is still there: only the bytes are gone.
      #expect(try s.send(.get("/v0/b/app/o/gone.txt")).status == 200)

      let metrics = try s.send(.get("/metrics")).text
      #expect(metrics.contains("larder_missing_content_reads 1\n"), "\(metrics)")
    }
  }
}

/// An object whose content `larder verify --repair` found damaged and quarantined is named by
/// the run, and its downloads (Firebase and GCS, GET and HEAD) answer 410 with a message that
/// says the content is damaged and how to heal it; uploading the same bytes heals it (issue 31:
/// the run printed "0 quarantined" and the download was a bare 500).
@Suite struct DamagedContentTests {
  @Test(TestBlobs.filesystemOnly) func verifyNamesTheDamagedObjectsAndTheirDownloadsSayHowToHeal() throws {
    try withService { s in
      let original = (0..<40_000).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }
      let sha = try #require(try s.upload("photos/cat.jpg", original)["sha256"] as? String)
      try s.upload("backup/cat.jpg", original)
      try s.upload("fine.txt", Array("fine".utf8))
      let path = s.blobsDirectory.appendingPathComponent("\(sha.prefix(2))/\(sha.dropFirst(2).prefix(2))/\(sha)").path
      #expect(chmod(path, 0o644) == 0)
      let fd = open(path, O_RDWR)
      var byte: UInt8 = 0
      #expect(pread(fd, &byte, 1, 20_000) == 1)
      byte ^= 0x5a
      #expect(pwrite(fd, &byte, 1, 20_000) == 1)
      close(fd)

      var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("LARDER_") }
      environment.merge(TestStore.processEnvironment(for: s.directory)) { $1 }
      let repair = try Subprocess.run(
        try ServeProcess.larderBinary(), ["verify", "--repair", "--data", s.directory.path], environment: environment)
      #expect(repair.status == 0, "\(repair)")
      let lines = repair.stdout.split(separator: "\n").map(String.init)
      let heal = "upload the object's original bytes again to heal it"
      #expect(lines.count == 5, "\(repair.stdout)")
      #expect(lines.first?.hasPrefix("repaired  hash-mismatch  \(sha)  content hashes to ") == true, "\(repair.stdout)")
      #expect(lines.dropFirst().first == "damaged  app/backup/cat.jpg  content \(sha) (quarantined); \(heal)")
      #expect(lines.dropFirst(2).first == "damaged  app/photos/cat.jpg  content \(sha) (quarantined); \(heal)")
      #expect(lines.dropFirst(3).first == "checked 2 blobs (39.1 KiB): 1 findings, 0 unrepaired, 1 quarantined")
      #expect(
        lines.last
          == "this run quarantined 1 damaged content (2 objects affected): their downloads answer 410 with what to do until they are uploaded again"
      )

      let expected =
        "the stored content of this object (\(sha)) is damaged: it failed verification and was quarantined; \(heal)"
      for target in [
        "/v0/b/app/o/photos%2Fcat.jpg?alt=media", "/storage/v1/b/app/o/photos%2Fcat.jpg?alt=media",
        "/download/storage/v1/b/app/o/photos%2Fcat.jpg?alt=media",
      ] {
        let get = try s.send(.get(target))
        #expect(get.status == 410, "\(target): \(get.status) \(get.text)")
        let error = get.json?["error"] as? [String: Any]
        #expect(error?["code"] as? Int == 410, "\(target)")
        #expect(error?["message"] as? String == expected, "\(target): \(get.text)")
        #expect(try s.send(.head(target)).status == 410, "HEAD \(target)")
      }
      // The name and its metadata stay; the bystander is served.
      #expect(try s.send(.get("/v0/b/app/o/photos%2Fcat.jpg")).status == 200)
      #expect(try s.send(.get("/v0/b/app/o/fine.txt?alt=media")).body == Array("fine".utf8))

      // The same bytes uploaded again (any name) heal every object of that content.
      try s.upload("photos/cat-again.jpg", original)
      for target in ["/v0/b/app/o/photos%2Fcat.jpg?alt=media", "/storage/v1/b/app/o/backup%2Fcat.jpg?alt=media"] {
        let healed = try s.send(.get(target))
        #expect(healed.status == 200, "\(target): \(healed.text)")
        #expect(healed.body == original, "\(target)")
        #expect(try s.send(.head(target)).status == 200)
      }
    }
  }
}
