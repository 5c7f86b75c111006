import Foundation
import Larder
import LarderImages
import LarderTestSupport
import Testing

/// `larder images warm` through the binary, on real images: what it renders, skips and reports,
/// the `derived_files` rows it leaves, and that a download asking for the same variant is then
/// served from them.
@Suite struct ImageCommandTests {
  static let params = "v1;w=200;h=200;r=cover;f=webp;q=80"

  /// `larder images warm ARGS… --data DATA` (Sandbox.larder puts `--data` after the first word).
  func runWarm(_ box: Sandbox, _ arguments: String...) throws -> RunResult {
    try CLI.larder(["images", "warm"] + arguments + ["--data", box.dataPath])
  }

  @Test func warmRendersEveryImageUnderThePrefixAndDownloadsHitItsCache() throws {
    let box = try Sandbox()
    let photo = try TestImages.solid(1200, 800, as: .jpeg)
    try box.put("bkt/photos/a.jpg", photo)
    try box.put("bkt/photos/deep/b.png", try TestImages.solid(300, 600, [10, 200, 10, 128], as: .png))
    try box.put("bkt/photos/copy-of-a.jpg", photo)  // the same content: its variant is a's
    try box.put("bkt/photos/notes.txt", Array("not a picture".utf8))
    try box.put("bkt/other/c.jpg", try TestImages.solid(100, 100, as: .jpeg))

    let warm = try runWarm(box, "bkt/photos/", "--size", "200x200", "--format", "webp")
    #expect(warm.status == 0, "\(warm)")
    #expect(
      warm.stdoutLines.last
        == "3 variants of bkt/photos/: 2 rendered, 1 already cached, 1 skipped (not images), 0 failed")
    let larder = try TestStore.open(at: box.data)
    #expect(try Sandbox.count(larder, "derived_files") == 2)
    let source = try larder.objects.get(bucket: "bkt", name: "photos/a.jpg").file
    let variant = try #require(try larder.derived.find(source: source.sha256, params: Self.params))
    #expect(variant.contentType == "image/webp")
    let other = try larder.objects.get(bucket: "bkt", name: "other/c.jpg").file
    #expect(try larder.derived.find(source: other.sha256, params: Self.params) == nil)

    // Again: everything is cached already.
    let again = try runWarm(box, "bkt/photos", "--size", "200x200", "--format", "webp")
    #expect(again.status == 0, "\(again)")
    #expect(
      again.stdoutLines.last
        == "3 variants of bkt/photos: 0 rendered, 3 already cached, 1 skipped (not images), 0 failed")
    #expect(try Sandbox.count(larder, "derived_files") == 2)

    // The download URL with the same parameters is served from the warmed row: no new render.
    let filesBefore = try Sandbox.count(larder, "files")
    var served = try ServedLarder(box)
    defer { served.kill() }
    let r = try served.exchange("GET", "/v0/b/bkt/o/photos%2Fa.jpg?alt=media&width=200&height=200&format=webp")
    #expect(r.status == 200, "\(r.text)")
    #expect(r.headers["content-type"] == "image/webp")
    #expect(r.headers["etag"] == "\"\(variant.sha256)\"")
    let image = try Vips.decode(r.body)
    #expect((image.width, image.height) == (200, 200))
    let png = try served.exchange(
      "GET", "/v0/b/bkt/o/photos%2Fdeep%2Fb.png?alt=media&width=200&height=200&format=webp")
    #expect(png.status == 200)
    #expect(try Vips.decode(png.body).bands == 4)  // alpha kept
    #expect(try Sandbox.count(larder, "derived_files") == 2)
    #expect(try Sandbox.count(larder, "files") == filesBefore)
  }

  @Test func warmWithOneSideAndOriginFormatKeepsTheAspectAndTheType() throws {
    let box = try Sandbox()
    try box.put("bkt/a.jpg", try TestImages.solid(1200, 800, as: .jpeg))
    let warm = try runWarm(
      box, "bkt", "--size", "300x", "--resize", "contain", "--quality", "50")
    #expect(warm.status == 0, "\(warm)")
    #expect(
      warm.stdoutLines.last
        == "1 variants of bkt/: 1 rendered, 0 already cached, 0 skipped (not images), 0 failed")
    let larder = try TestStore.open(at: box.data)
    let source = try larder.objects.get(bucket: "bkt", name: "a.jpg").file
    let variant = try #require(
      try larder.derived.find(source: source.sha256, params: "v1;w=300;h=0;r=contain;f=jpeg;q=50"))
    let image = try Vips.decode([UInt8](try larder.files.data(of: variant)))
    #expect((image.width, image.height) == (300, 200))
  }

  @Test func gcDryRunReportsTheWarmedVariantsTheRealRunReleases() throws {
    let box = try Sandbox()
    try box.put("bkt/a.jpg", try TestImages.solid(640, 480, as: .jpeg))
    #expect(try runWarm(box, "bkt/", "--size", "64x64").status == 0)
    #expect(try runWarm(box, "bkt/", "--size", "32x", "--format", "png").status == 0)
    #expect(try box.larder("rm", "bkt/a.jpg").status == 0)
    let dry = try box.larder("gc", "--dry-run", "--grace", "0s", "--json")
    #expect(dry.status == 0, "\(dry)")
    let predicted = try dry.jsonObject()
    #expect(predicted["variantsReleased"] as? Int == 2)
    #expect(predicted["filesReleased"] as? Int == 3)
    #expect(predicted["blobsRemoved"] as? Int == 3)
    let text = try box.larder("gc", "--dry-run", "--grace", "0s")
    #expect(text.stdoutLines.contains("  image variants:  2 (their source is deleted)"), "\(text)")
    #expect(try Sandbox.count(try TestStore.open(at: box.data), "derived_files") == 2)
    let done = try box.larder("gc", "--grace", "0s", "--json").jsonObject()
    for key in ["variantsReleased", "filesReleased", "blobsRemoved", "blobBytesFreed"] {
      #expect(done[key] as? Int == predicted[key] as? Int, "\(key)")
    }
    #expect(try Sandbox.count(try TestStore.open(at: box.data), "derived_files") == 0)
  }

  @Test func aBrokenImageIsReportedCountedAndExits1() throws {
    let box = try Sandbox()
    try box.put("bkt/good.png", try TestImages.solid(64, 64, as: .png))
    try box.put("bkt/broken.jpg", Array(try TestImages.solid(400, 400, as: .jpeg).prefix(400)))
    let warm = try runWarm(box, "bkt/", "--size", "32x32")
    #expect(warm.status == 1, "\(warm)")
    #expect(warm.stderr.contains("bkt/broken.jpg: the image could not be transformed"), "\(warm.stderr)")
    #expect(
      warm.stdoutLines.last
        == "1 variants of bkt/: 1 rendered, 0 already cached, 0 skipped (not images), 1 failed")
  }

  @Test(arguments: [
    (["--size", "0x10"], "width must be"),
    (["--size", "2501x10"], "width must be"),
    (["--size", "abc"], "--size must be WxH"),
    (["--size", "x"], "--size must be WxH"),
    (["--size", "10x10", "--format", "gif"], "format"),
    (["--size", "10x10", "--resize", "crop"], "resize must be"),
    (["--size", "10x10", "--quality", "0"], "quality"),
    ([], "--size is required"),
  ])
  func badUsageIsExit2(_ extra: [String], _ message: String) throws {
    let box = try Sandbox()
    let r = try CLI.larder(["images", "warm", "bkt/", "--data", box.dataPath] + extra)
    #expect(r.status == 2, "\(extra): \(r)")
    #expect(r.stderr.contains(message), "\(extra): \(r.stderr)")
  }
}
