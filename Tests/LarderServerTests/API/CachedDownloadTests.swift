import Foundation
import LarderTestSupport
import Larder
import LarderHTTP
import Testing

/// Downloads served while the object cache is warm: a replaced, updated or deleted object is
/// answered as it now is, whether this server or another process on its directory changed it,
/// and a download token is judged against the current tokens on every request.
@Suite struct CachedDownloadTests {
  static let media = "/v0/b/app/o/\(enc("pics/a.bin"))?alt=media"

  @Test func overwriteAndDeleteThroughTheServerAreServedAtOnce() throws {
    try withService { s in
      #expect(try s.send(.init("POST", "/v0/b/app/o?name=\(enc("pics/a.bin"))", body: Array("first".utf8))).status == 200)
      for _ in 0..<5 { #expect(try s.send(.get(Self.media)).body == Array("first".utf8)) }

      #expect(try s.send(.init("POST", "/v0/b/app/o?name=\(enc("pics/a.bin"))", body: Array("second!".utf8))).status == 200)
      let replaced = try s.send(.get(Self.media))
      #expect(replaced.status == 200)
      #expect(replaced.body == Array("second!".utf8))
      #expect(replaced["Content-Length"] == "7")
      #expect(replaced["ETag"] == "\"\(sha256Hex(Array("second!".utf8)))\"")

      #expect(try s.send(.init("DELETE", "/v0/b/app/o/\(enc("pics/a.bin"))")).status == 204)
      #expect(try s.send(.get(Self.media)).status == 404)
      #expect(try s.send(.get(Self.media)).status == 404)
    }
  }

  @Test func writesByAnotherStoreOnTheDirectoryAreServedAtOnce() throws {
    try withService { s in
      let other = try TestStore.open(at: s.directory)
      _ = try other.objects.put(bucket: "app", name: "pics/a.bin", data: Data("first".utf8))
      for _ in 0..<5 { #expect(try s.send(.get(Self.media)).body == Array("first".utf8)) }

      _ = try other.objects.put(bucket: "app", name: "pics/a.bin", data: Data("second!".utf8))
      let replaced = try s.send(.get(Self.media))
      #expect(replaced.status == 200)
      #expect(replaced.body == Array("second!".utf8))

      _ = try other.objects.update(bucket: "app", name: "pics/a.bin", patch: ObjectPatch(cacheControl: "no-store"))
      #expect(try s.send(.get(Self.media))["Cache-Control"] == "no-store")

      try other.objects.delete(bucket: "app", name: "pics/a.bin")
      #expect(try s.send(.get(Self.media)).status == 404)
    }
  }

  @Test func aRotatedDownloadTokenStopsGrantingAtOnce() throws {
    let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("larder-rules-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: scratch) }
    let rules = scratch.appendingPathComponent("storage.rules")
    // Reads are denied: only a download token grants the content.
    try Data(
      """
      rules_version = '2';
      service firebase.storage {
        match /b/{bucket}/o {
          match /{allPaths=**} { allow write: if true; }
        }
      }
      """.utf8
    ).write(to: rules)
    try withService(policy: .rulesFile(rules)) { s in
      let other = try TestStore.open(at: s.directory)
      let object = try other.objects.put(bucket: "app", name: "pics/a.bin", data: Data("secret".utf8))
      let old = try #require(object.downloadTokens.first)
      #expect(try s.send(.get(Self.media)).status == 403)
      for _ in 0..<3 { #expect(try s.send(.get(Self.media + "&token=\(old)")).body == Array("secret".utf8)) }

      let rotated = try other.objects.update(bucket: "app", name: "pics/a.bin", patch: ObjectPatch(rotateDownloadToken: true))
      let new = try #require(rotated.downloadTokens.first)
      #expect(try s.send(.get(Self.media + "&token=\(old)")).status == 403)
      let granted = try s.send(.get(Self.media + "&token=\(new)"))
      #expect(granted.status == 200)
      #expect(granted.body == Array("secret".utf8))
    }
  }

  @Test func metadataAndDownloadHeadersFollowAPatchAtOnce() throws {
    try withService { s in
      let item = "/v0/b/app/o/\(enc("pics/a.bin"))"
      #expect(try s.send(.init("POST", "/v0/b/app/o?name=\(enc("pics/a.bin"))", body: Array("first".utf8))).status == 200)
      for _ in 0..<3 {
        #expect(try s.send(.get(item)).json?["metageneration"] as? String == "1")
        let media = try s.send(.get(Self.media))
        #expect(media["Cache-Control"] == "private, max-age=0")
        #expect(media["Content-Disposition"] == "inline; filename*=UTF-8''a.bin")
      }
      let patch = #"{"cacheControl":"public, max-age=60","contentDisposition":"inline; filename=x.bin"}"#
      #expect(
        try s.send(.init("PATCH", item, headers: [("Content-Type", "application/json")], body: Array(patch.utf8))).status
          == 200)
      let metadata = try s.send(.get(item)).json
      #expect(metadata?["metageneration"] as? String == "2")
      #expect(metadata?["cacheControl"] as? String == "public, max-age=60")
      let head = try s.send(.init("HEAD", item))
      #expect(head.status == 200)
      #expect(head["Content-Length"] == String(try s.send(.get(item)).body.count))
      let media = try s.send(.get(Self.media))
      #expect(media.status == 200)
      #expect(media.body == Array("first".utf8))
      #expect(media["Cache-Control"] == "public, max-age=60")
      #expect(media["Content-Disposition"] == "inline; filename=x.bin")
      #expect(media["X-Goog-Metageneration"] == "2")
      let partial = try s.send(.init("GET", Self.media, headers: [("Range", "bytes=1-3")]))
      #expect(partial.status == 206)
      #expect(partial.body == Array("irs".utf8))
      #expect(partial["Content-Range"] == "bytes 1-3/5")
      #expect(partial["Cache-Control"] == "public, max-age=60")
    }
  }
}
