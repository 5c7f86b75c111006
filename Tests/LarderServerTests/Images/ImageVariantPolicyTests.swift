import Foundation
import Larder
import LarderImages
import LarderServer
import LarderTestSupport
import Synchronization
import Testing

/// What a variant may reveal and cost, over the live server: no metadata (issue 31.2), a format
/// the client can show (31.3), a bounded cache and a fair share of the renderers (37.2).
@Suite struct ImageVariantPolicyTests {
  func decoded(_ r: WireResponse) throws -> Vips.Image { try Vips.decode(r.body) }

  @Test func aPhonePhotosVariantsRevealNothingAndTheOriginalStaysExact() throws {
    try withService { s in
      let photo = try TestImages.phoneJPEG()
      try s.upload("u1/photo.jpg", photo, headers: [("Content-Type", "image/jpeg")])
      let media = "/v0/b/app/o/u1%2Fphoto.jpg?alt=media"
      let original = try s.request("GET", media)
      #expect(original.status == 200 && original.body == photo)
      var asked: [(String, [(String, String)], String)] = ImageFormat.allCases.map {
        ("&width=10&format=\($0.rawValue)", [], $0.contentType)
      }
      asked.append(("&width=10", [("Accept", "image/webp,*/*")], "image/webp"))
      asked.append(("&width=10", [("Accept", "image/avif,*/*")], "image/avif"))
      for (query, headers, type) in asked {
        for url in [media + query, "/storage/v1/b/app/o/u1%2Fphoto.jpg?alt=media" + query] {
          let r = try s.request("GET", url, headers: headers)
          #expect(r.status == 200 && r["Content-Type"] == type, "\(url)")
          #expect(ImageMetadataScan.markers(in: r.body) == [], "\(url)")
          let image = try decoded(r)
          #expect((image.width, image.height) == (10, 20), "\(url): the orientation is in the pixels")
        }
      }
      // Downloading the original again: still its exact bytes, metadata and all.
      #expect(try s.request("GET", media).body == photo)
    }
  }

  /// Issue 31.3 over the wire: an iPhone's HEIC asked for with `Accept: */*` is a JPEG (a PNG
  /// with alpha), AVIF and WebP only when `Accept` names them; browser formats keep theirs.
  @Test func eachSourceComesInAFormatTheClientCanShow() throws {
    try withService { s in
      let sources: [(String, [UInt8])] = [
        ("a.heic", try TestImages.heic(64, 48)),
        ("alpha.heic", try TestImages.heic(64, 48, [30, 120, 200, 128])),
        ("a.avif", try TestImages.solid(64, 48, as: .avif)),
        ("a.webp", try TestImages.solid(64, 48, as: .webp)),
        ("a.png", try TestImages.solid(64, 48, as: .png)),
        ("a.gif", try TestImages.animatedGIF()),
      ]
      for (name, bytes) in sources { try s.upload(name, bytes) }
      // libmagic knows HEIC for what it is: not a type every browser shows.
      #expect(
        try s.service.larder.objects.find(bucket: "app", name: "a.heic")?.file.contentType == "image/heic")
      let cases: [(String, String?, String)] = [
        ("a.heic", "*/*", "image/jpeg"), ("a.heic", nil, "image/jpeg"),
        ("a.heic", "image/webp,*/*", "image/webp"), ("a.heic", "image/avif,image/webp,*/*", "image/avif"),
        ("alpha.heic", "*/*", "image/png"), ("a.avif", "*/*", "image/jpeg"),
        ("a.avif", "image/avif", "image/avif"), ("a.webp", "*/*", "image/webp"),
        ("a.webp", "image/avif,*/*", "image/avif"), ("a.png", "text/html,*/*", "image/png"),
        ("a.gif", "*/*", "image/png"),
      ]
      for (name, accept, type) in cases {
        let r = try s.request(
          "GET", "/v0/b/app/o/\(name)?alt=media&width=32", headers: accept.map { [("Accept", $0)] } ?? [])
        #expect(r.status == 200, "\(name) \(accept ?? "no Accept")")
        #expect(r["Content-Type"] == type, "\(name) \(accept ?? "no Accept")")
        #expect(r["Vary"] == "Accept", "\(name)")
        #expect(try decoded(r).width == 32, "\(name) \(accept ?? "no Accept")")
      }
      let png = try s.request("GET", "/v0/b/app/o/alpha.heic?alt=media&width=32")
      #expect(try decoded(png).hasAlpha)
    }
  }

  /// Issue 37.2's attack, short: ever other sizes of one public image of random pixels. After
  /// every answer the variants kept, and the blobs on disk, are within the budget.
  @Test func distinctSizesOfOneImageStayWithinTheCacheBudget() throws {
    let budget: Int64 = 3 << 20
    try withService(configure: { $0.images?.limits.cacheBytes = budget }) { s in
      try s.upload("public/noise.png", try TestImages.noisePNG(300, 300))
      let larder = s.service.larder
      let before = try larder.statistics().blobBytes
      let disk = {
        s.blobFiles().reduce(Int64(0)) { sum, path in
          sum
            + Int64(
              (try? FileManager.default.attributesOfItem(
                atPath: s.blobsDirectory.appendingPathComponent(path).path)[.size] as? Int) ?? 0)
        }
      }
      let diskBefore = disk()
      for i in 0..<60 {
        let width = 200 + 10 * i
        let r = try s.request("GET", "/v0/b/app/o/public%2Fnoise.png?alt=media&format=png&width=\(width)")
        #expect(r.status == 200)
        #expect(try decoded(r).width == width)
        let derived = try larder.derived.statistics()
        #expect(derived.bytes <= budget, "after \(i + 1) requests")
        #expect(try larder.statistics().blobBytes - before <= budget, "after \(i + 1) requests")
        if TestStore.blobsBase == nil {
          #expect(disk() - diskBefore <= budget, "after \(i + 1) requests")
        }
      }
    }
  }

  /// A variant larger than the whole budget is served (every download feature on it) and not
  /// kept: nothing of it is in the store afterwards.
  @Test func aVariantTooLargeToKeepIsServedFromMemory() throws {
    try withService(configure: { $0.images?.limits.cacheBytes = 1000 }) { s in
      try s.upload("noise.png", try TestImages.noisePNG(100, 100))
      let before = try s.rowCounts()
      for url in [
        "/v0/b/app/o/noise.png?alt=media&width=80&format=png",
        "/storage/v1/b/app/o/noise.png?alt=media&width=80&format=png",
      ] {
        let r = try s.request("GET", url)
        #expect(r.status == 200 && r["Content-Type"] == "image/png")
        #expect(r.body.count > 1000 && r["Content-Length"] == String(r.body.count))
        #expect(r["ETag"] == "\"\(sha256Hex(r.body))\"")
        #expect(try decoded(r).width == 80)
        let partial = try s.request("GET", url, headers: [("Range", "bytes=0-9")])
        #expect(partial.status == 206 && partial.body == Array(r.body.prefix(10)))
        #expect(try s.request("GET", url, headers: [("If-None-Match", r["ETag"]!)]).status == 304)
      }
      #expect(try s.service.larder.derived.statistics() == (0, 0))
      #expect(try s.rowCounts() == before)
    }
  }

  @Test func sizesSnapToTheOperatorsList() throws {
    try withService(configure: { $0.images?.limits.sizes = [64, 128, 256] }) { s in
      try s.upload("p.png", try TestImages.solid(400, 400, as: .png))
      let a = try s.request("GET", "/v0/b/app/o/p.png?alt=media&width=100")
      let b = try s.request("GET", "/v0/b/app/o/p.png?alt=media&width=120")
      #expect(try decoded(a).width == 128 && a.body == b.body)
      #expect(try s.service.larder.derived.statistics().count == 1)
    }
  }

  /// One client (here the anonymous address) past its share of the renderers is answered 429
  /// with `Retry-After` at once; another identity's render is served meanwhile.
  @Test func oneClientsRendersAreCappedAndAnotherIsServed() throws {
    try withService(configure: {
      $0.images?.renderThreads = 1
      $0.images?.rendersPerClient = 1
    }) { s in
      try s.upload("big.png", try TestImages.noisePNG(1200, 1200))
      let pool = try #require(s.service.context.images?.pool)
      let first = Mutex<WireResponse?>(nil)
      let group = DispatchGroup()
      DispatchQueue.global().async(group: group) {
        let r = try? s.request("GET", "/v0/b/app/o/big.png?alt=media&format=png&width=2400")
        first.withLock { $0 = r }
      }
      while pool.pending == 0 { usleep(1000) }  // the anonymous client's render is in the pool
      let refused = try s.request("GET", "/v0/b/app/o/big.png?alt=media&format=png&width=2401")
      #expect(refused.status == 429)
      #expect(refused["Retry-After"] == "1")
      #expect((refused.error?["message"] as? String)?.contains("retry") == true)
      let other = try s.request(
        "GET", "/v0/b/app/o/big.png?alt=media&width=64&format=webp", headers: s.auth("u2"))
      #expect(other.status == 200 && other["Content-Type"] == "image/webp")
      group.wait()
      #expect(first.withLock { $0?.status } == 200)
      // Its render done, the anonymous client is served again.
      #expect(try s.request("GET", "/v0/b/app/o/big.png?alt=media&format=png&width=100").status == 200)
    }
  }
}
