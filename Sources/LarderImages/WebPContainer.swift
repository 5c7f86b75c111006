/// WebP's RIFF container: its chunks, and a copy without the metadata ones.
///
/// ```swift
/// WebPContainer.chunks(webp).map(\.type)      // ["VP8X", "VP8 ", "EXIF"]
/// WebPContainer.removingMetadata(webp)         // the same image, no EXIF, XMP or ICC chunk
/// ```
public enum WebPContainer {
  /// The metadata chunk types, and the VP8X flag that announces each.
  static let metadata: [String: UInt8] = ["EXIF": 0x08, "XMP ": 0x04, "ICCP": 0x20]

  /// The chunks after the `RIFF….WEBP` header: each one's type and its whole extent (header,
  /// payload and padding); empty when `bytes` is not a WebP file.
  public static func chunks(_ bytes: [UInt8]) -> [(type: String, range: Range<Int>)] {
    guard bytes.count >= 12, bytes[0..<4].elementsEqual("RIFF".utf8), bytes[8..<12].elementsEqual("WEBP".utf8)
    else { return [] }
    var found: [(String, Range<Int>)] = []
    var i = 12
    while i + 8 <= bytes.count {
      let length =
        Int(bytes[i + 4]) | Int(bytes[i + 5]) << 8 | Int(bytes[i + 6]) << 16 | Int(bytes[i + 7]) << 24
      let end = min(bytes.count, i + 8 + length + (length & 1))
      found.append((String(decoding: bytes[i..<(i + 4)], as: UTF8.self), i..<end))
      i = end
    }
    return found
  }

  /// `bytes` without EXIF, XMP and ICC chunks, the VP8X flags and the RIFF size set to match.
  /// libvips 8.14's webpsave writes an EXIF chunk of its own making even when told to strip.
  public static func removingMetadata(_ bytes: [UInt8]) -> [UInt8] {
    let all = chunks(bytes)
    guard all.contains(where: { metadata[$0.type] != nil }) else { return bytes }
    var out = Array(bytes[0..<12])
    for chunk in all where metadata[chunk.type] == nil {
      var part = Array(bytes[chunk.range])
      if chunk.type == "VP8X", part.count > 8 { part[8] &= ~metadata.values.reduce(0, |) }
      out += part
    }
    let size = out.count - 8
    out.replaceSubrange(
      4..<8,
      with: [UInt8(size & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size >> 16 & 0xFF), UInt8(size >> 24 & 0xFF)])
    return out
  }
}
