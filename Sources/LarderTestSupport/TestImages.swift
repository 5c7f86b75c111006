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

  /// A `side` x `side` greyscale PNG of zero rows, deflated: a few KB that would decode to
  /// `side`² bytes.
  public static func bomb(side: Int = 30_000) throws -> [UInt8] {
    let script = """
      import sys, zlib, struct
      n = int(sys.argv[1])
      def chunk(t, d): return struct.pack('>I', len(d)) + t + d + struct.pack('>I', zlib.crc32(t + d) & 0xffffffff)
      z = zlib.compressobj(9)
      row = b'\\x00' * (n + 1)
      data = b''.join(z.compress(row) for _ in range(n)) + z.flush()
      sys.stdout.buffer.write(b'\\x89PNG\\r\\n\\x1a\\n' + chunk(b'IHDR', struct.pack('>IIBBBBB', n, n, 8, 0, 0, 0, 0)) + chunk(b'IDAT', data) + chunk(b'IEND', b''))
      """
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
    p.arguments = ["-c", script, String(side)]
    let pipe = Pipe()
    p.standardOutput = pipe
    try p.run()
    let bytes = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return [UInt8](bytes)
  }

  public struct SkipReason: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
  }
}
