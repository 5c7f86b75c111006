import Foundation
import Larder
import LarderImages

/// `larder images warm`: renders one variant of every image under a prefix ahead of traffic (the
/// Firebase "Resize Images" extension's backfill), into the same cache the downloads read.
struct ImagesWarmCommand: Command {
  static let target = Positional("BUCKET[/PREFIX]", help: "the objects to render variants of")
  static let size = Option.value(
    "--size", "WxH", required: true, help: "the box: 200x200, 200x (width only) or x200 (height only)")
  static let format = Option.value(
    "--format", "FORMAT", help: "webp, avif, jpeg, png or origin (default: origin, the source's format)")
  static let resize = Option.value("--resize", "MODE", help: "cover, contain or fill (default: cover)")
  static let quality = Option.value("--quality", "Q", help: "1–100 (default: 80)")

  static let configuration = CommandConfiguration(
    name: "images warm", summary: "render image variants of BUCKET/PREFIX ahead of traffic",
    discussion: """
      Renders the variant a download with the same parameters asks for (`?alt=media&width=W&height=H
      &resize=…&format=…`) for every image object under the prefix, so its first request is a cache
      hit. Without --format the variant keeps the source's format, as for a client that sends no
      Accept. Objects that are not images (by their detected type) are skipped and counted.
      Exit 1 when any render failed (each is reported on standard error).
      """,
    positionals: [target], options: [size, format, resize, quality], groups: [StoreOptions.self])

  var store: StoreOptions
  var bucket: String
  var prefix: String
  var transform: ImageTransform

  init(_ arguments: ParsedArguments) throws(UsageError) {
    store = try StoreOptions(arguments)
    (bucket, prefix) = parseBucketPrefix(arguments.required(Self.target))
    let box = arguments.value(Self.size)!
    let sides = box.split(separator: "x", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
    guard sides.count == 2, !(sides[0].isEmpty && sides[1].isEmpty) else {
      throw UsageError("--size must be WxH, Wx or xH, got '\(box)'")
    }
    // The downloads' own parsing and limits, so a warmed variant is the one a URL asks for.
    var query = ["format": arguments.value(Self.format) ?? "origin"]
    query["width"] = sides[0].isEmpty ? nil : sides[0]
    query["height"] = sides[1].isEmpty ? nil : sides[1]
    query["resize"] = arguments.value(Self.resize)
    query["quality"] = arguments.value(Self.quality)
    do {
      transform = try ImageTransform(query: query, maxDimension: ImageVariants.Limits().maxDimension)!
    } catch {
      throw UsageError(error.description)
    }
  }

  func run() throws {
    let larder = try store.open()
    let images = ImageVariants(larder: larder)
    var objects: [StoredObject] = []
    var token: String?
    repeat {
      let page = try larder.objects.list(
        bucket: bucket, prefix: prefix, delimiter: nil, maxResults: 1000, pageToken: token)
      objects += page.items
      token = page.nextPageToken
    } while token != nil
    let progress = ProgressBar(total: Int64(objects.count), label: "warm", unit: .items)
    var (rendered, cached, skipped, failed) = (0, 0, 0, 0)
    for (i, object) in objects.enumerated() {
      defer { progress.update(Int64(i + 1)) }
      let file = object.file
      guard ImageFormat.isTransformable(sourceType: file.contentType) else {
        skipped += 1
        continue
      }
      do {
        let format = try images.outputFormat(transform, of: file, accept: nil)
        let known = try larder.derived.find(source: file.sha256, params: transform.canonical(format: format))
        _ = try images.variant(of: file, transform: transform, format: format)
        if known == nil { rendered += 1 } else { cached += 1 }
      } catch let error as ImageError {
        failed += 1
        FileHandle.standardError.write(Data("larder: \(object.bucket)/\(object.name): \(error)\n".utf8))
      }
    }
    progress.finish()
    print(
      "\(rendered + cached) variants of \(bucket)/\(prefix): \(rendered) rendered, \(cached) already cached, "
        + "\(skipped) skipped (not images), \(failed) failed")
    if failed > 0 { throw Exit(code: 1) }
  }
}
