import Foundation
import LarderImages

/// Test images, made by libvips (through LarderImages) or by ImageMagick's `convert` where libvips
/// writes no such file (EXIF orientation, CMYK JPEG, animated GIF), and a decompression bomb
/// written by hand.
public enum TestImages {
  /// A solid sRGB image (`value` 3 bands) or one with alpha (4 bands), encoded.
  public static func solid(
    _ width: Int, _ height: Int, _ value: [Double] = [200, 30, 30], as format: ImageFormat
  )
    throws -> [UInt8]
  {
    try Vips.solid(width: width, height: height, value: value).encoded(as: format, quality: 90)
  }

  /// ImageMagick's real `convert` (not a stand-in earlier on the PATH), or nil: the tests that
  /// need it say loudly that they skip.
  public static let convert: String? = ["/usr/bin/convert-im6.q16", "/usr/bin/convert"].first {
    FileManager.default.isExecutableFile(atPath: $0)
  }

  /// Runs `convert` with `arguments` and returns the bytes it wrote to `output` (a temp path).
  public static func imagemagick(_ arguments: [String], ext: String) throws -> [UInt8] {
    guard let convert else { throw SkipReason("ImageMagick convert is not installed (scripts/deps.sh)") }
    let out = FileManager.default.temporaryDirectory.appendingPathComponent(
      "larder-img-\(UUID().uuidString).\(ext)")
    defer { try? FileManager.default.removeItem(at: out) }
    let p = Process()
    p.executableURL = URL(fileURLWithPath: convert)
    p.arguments = arguments + [out.path]
    try p.run()
    p.waitUntilExit()
    guard p.terminationStatus == 0 else { throw SkipReason("convert \(arguments) failed") }
    return [UInt8](try Data(contentsOf: out))
  }

  /// A 300x200 JPEG whose pixels are stored rotated, with EXIF orientation 6 (displayed 200x300).
  public static func orientedJPEG() throws -> [UInt8] {
    try Vips.solid(width: 300, height: 200, value: [255, 0, 0]).oriented(6).encoded(
      as: .jpeg, quality: 90, keepMetadata: true)
  }

  /// A 120x80 CMYK JPEG.
  public static func cmykJPEG() throws -> [UInt8] {
    try imagemagick(["-size", "120x80", "xc:blue", "-colorspace", "CMYK"], ext: "jpg")
  }

  /// A 2-frame 100x50 animated GIF: red, then blue.
  public static func animatedGIF() throws -> [UInt8] {
    try imagemagick(["-delay", "10", "-size", "100x50", "xc:red", "xc:blue", "-loop", "0"], ext: "gif")
  }

  /// A `width` x `height` RGB PNG of random pixels: it does not compress, so its variants are
  /// as large as their pixels (what an attacker asks for to fill a cache).
  public static func noisePNG(_ width: Int, _ height: Int) throws -> [UInt8] {
    let script = """
      w, h = int(sys.argv[1]), int(sys.argv[2])
      rows = b''.join(b'\\x00' + os.urandom(w * 3) for _ in range(h))
      png(w, h, 2, zlib.compress(rows, 1))
      """
    return try python(script, [String(width), String(height)])
  }

  /// A HEIC (HEVC in HEIF, what iPhones write) of a solid image, by libvips' CLI (libheif with
  /// x265): 3 bands, or 4 with alpha.
  public static func heic(_ width: Int, _ height: Int, _ value: [Double] = [30, 120, 200]) throws -> [UInt8] {
    let vips = ["/usr/bin/vips", "/usr/local/bin/vips"].first {
      FileManager.default.isExecutableFile(atPath: $0)
    }
    guard let vips else {
      throw SkipReason("libvips' CLI (libvips-tools) is not installed (scripts/deps.sh)")
    }
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent(
      "larder-heic-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let png = dir.appendingPathComponent("in.png")
    try Data(try solid(width, height, value, as: .png)).write(to: png)
    let out = dir.appendingPathComponent("out.heic")
    let p = Process()
    p.executableURL = URL(fileURLWithPath: vips)
    p.arguments = ["heifsave", png.path, out.path, "--compression", "hevc"]
    try p.run()
    p.waitUntilExit()
    guard p.terminationStatus == 0 else {
      throw SkipReason("vips heifsave --compression hevc failed (no x265?)")
    }
    return [UInt8](try Data(contentsOf: out))
  }

  /// Runs a Python `script` that writes a PNG with `png(width, height, colour_type, idat)`
  /// (8 bits per sample) and returns what it wrote.
  static func python(_ script: String, _ arguments: [String]) throws -> [UInt8] {
    let prelude = """
      import os, sys, zlib, struct
      def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
      def png(w, h, colour, idat): sys.stdout.buffer.write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', w, h, 8, colour, 0, 0, 0)) + chunk(b'IDAT', idat) + chunk(b'IEND', b''))

      """
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    p.arguments = ["-c", prelude + script] + arguments
    let pipe = Pipe()
    p.standardOutput = pipe
    try p.run()
    let bytes = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return [UInt8](bytes)
  }

  /// A `side` x `side` greyscale PNG of zero rows, deflated: a few KB that would decode to
  /// `side`² bytes.
  public static func bomb(side: Int = 30_000) throws -> [UInt8] {
    let script = """
      n = int(sys.argv[1])
      z = zlib.compressobj(9)
      row = b'\\x00' * (n + 1)
      png(n, n, 0, b''.join(z.compress(row) for _ in range(n)) + z.flush())
      """
    return try python(script, [String(side)])
  }

  public struct SkipReason: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
  }
}
