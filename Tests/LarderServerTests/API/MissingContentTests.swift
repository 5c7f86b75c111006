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
