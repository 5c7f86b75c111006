import Foundation
import Larder
import LarderHTTP
import LarderServer
import LarderTestSupport
import Synchronization
import Testing

/// Downloads that ask for an image variant wait for the render pool on threads of their own
/// (`render-wait-N`), answering later, so a burst of renders holds none of the engine's workers.
@Suite struct RenderRequestTests {
  /// A variant download starts as an answer given later (no worker taken); a plain download of
  /// the same route does not.
  @Test func aVariantDownloadIsAnsweredLaterAndAPlainOneIsNot() throws {
    try withService { s in
      var starts: [String] = []
      for target in [
        "/v0/b/app/o/a.png?alt=media&width=64", "/storage/v1/b/app/o/a.png?alt=media&width=64",
        "/download/storage/v1/b/app/o/a.png?alt=media&format=webp", "/storage/v1/b/app/o/a.png?alt=media",
      ] {
        switch s.service.app.start(try HTTPRequest(method: "GET", target: target)) {
        case .now: starts.append("now")
        case .onWorker: starts.append("worker")
        case .later(let route, _): starts.append("later \(route ?? "")")
        }
      }
      #expect(starts == ["later objects.download", "later gcs.objects.download", "later gcs.objects.download", "worker"])
    }
  }

  /// 20 renders queued behind one render thread (the test server has 8 workers): a download
  /// that needs a worker is answered while most of them still wait, and every render is served.
  @Test func queuedRendersLeaveTheWorkersToOtherRequests() throws {
    try withService(configure: {
      $0.http.perIPConnectionLimit = 0
      $0.images?.renderThreads = 1
      $0.images?.renderQueue = 64
      $0.images?.rendersPerClient = 64
    }) { s in
      try s.upload("big.png", try TestImages.noisePNG(1200, 1200))
      try s.upload("plain.txt", Array("plain".utf8))
      let pool = try #require(s.service.context.images?.pool)
      let renders = try (1...20).map { q -> WireConnection in
        let c = try WireConnection(port: s.port)
        try c.send(WireRequest("GET", "/v0/b/app/o/big.png?alt=media&format=webp&width=1200&quality=\(q)").bytes(closing: true))
        return c
      }
      // Every one reaches the pool (a render waiting there holds no worker: with 8 workers
      // held, no more than 8 would).
      #expect(pollUntil { pool.pending + pool.rendersStarted >= 20 })
      // The GCS download runs on a worker, never on a loop.
      let plain = try s.request("GET", "/storage/v1/b/app/o/plain.txt?alt=media")
      let pending = pool.pending
      #expect(plain.status == 200 && plain.text == "plain")
      #expect(pending >= 10, "renders still queued when the plain download was answered: \(pending)")
      for c in renders {
        let r = try c.readResponse()
        #expect(r.status == 200 && r["Content-Type"] == "image/webp")
      }
      #expect(pool.rendersStarted == 20)
    }
  }
}
