import Foundation
import LarderImages

/// What an encoded image carries besides its pixels, found by walking its container (never by
/// searching its bytes): JPEG segments, PNG chunks, WebP's RIFF chunks, AVIF/HEIF boxes.
///
/// ```swift
/// ImageMetadataScan.markers(in: jpeg)   // ["JPEG APP1 Exif", "JPEG APP2 ICC_PROFILE"]
/// ```
public enum ImageMetadataScan {
  /// The metadata a privacy check looks for, named by container and kind; empty when none.
  /// An unknown container is reported as such, so a check cannot pass by not understanding it.
  public static func markers(in bytes: [UInt8]) -> [String] {
    if bytes.starts(with: [0xFF, 0xD8]) { return jpeg(bytes) }
    if bytes.starts(with: [0x89, 0x50, 0x4E, 0x47]) { return png(bytes) }
    if bytes.count >= 12, ascii(bytes, 0, 4) == "RIFF", ascii(bytes, 8, 4) == "WEBP" { return webp(bytes) }
    if bytes.count >= 8, ascii(bytes, 4, 4) == "ftyp" { return boxes(bytes, 0..<bytes.count) }
    return ["unknown container"]
  }

  static func ascii(_ b: [UInt8], _ at: Int, _ count: Int) -> String {
    guard at >= 0, at + count <= b.count else { return "" }
    return String(decoding: b[at..<(at + count)], as: UTF8.self)
  }

  static func be(_ b: [UInt8], _ at: Int, _ count: Int) -> Int {
    guard at + count <= b.count else { return -1 }
    return b[at..<(at + count)].reduce(0) { $0 << 8 | Int($1) }
  }

  static func jpeg(_ b: [UInt8]) -> [String] {
    var found: [String] = []
    var i = 2
    while i + 4 <= b.count, b[i] == 0xFF {
      let marker = b[i + 1]
      if marker == 0xDA || marker == 0xD9 { break }  // the scan (entropy-coded data) begins
      let length = be(b, i + 2, 2)
      let payload = i + 4
      switch marker {
      case 0xE1:
        if ascii(b, payload, 6) == "Exif\0\0" {
          found.append("JPEG APP1 Exif")
        } else if ascii(b, payload, 28) == "http://ns.adobe.com/xap/1.0/" {
          found.append("JPEG APP1 XMP")
        } else {
          found.append("JPEG APP1")
        }
      case 0xE2 where ascii(b, payload, 11) == "ICC_PROFILE": found.append("JPEG APP2 ICC_PROFILE")
      case 0xED: found.append("JPEG APP13 IPTC")
      case 0xFE: found.append("JPEG COM")
      default: break
      }
      i += 2 + length
    }
    return found
  }

  static func png(_ b: [UInt8]) -> [String] {
    var found: [String] = []
    var i = 8
    while i + 8 <= b.count {
      let length = be(b, i, 4)
      let type = ascii(b, i + 4, 4)
      if ["eXIf", "iTXt", "zTXt", "tEXt", "iCCP"].contains(type) { found.append("PNG \(type)") }
      if type == "IEND" || length < 0 { break }
      i += 12 + length
    }
    return found
  }

  static func webp(_ b: [UInt8]) -> [String] {
    WebPContainer.chunks(b).map(\.type).filter { ["EXIF", "XMP ", "ICCP"].contains($0) }.map { "WebP \($0)" }
  }

  /// ISOBMFF boxes: an `Exif` item or a `mime` item (XMP) in `iinf`, an ICC profile in `colr`,
  /// and orientation transforms (`irot`, `imir`) that a viewer would still apply.
  static func boxes(_ b: [UInt8], _ range: Range<Int>) -> [String] {
    var found: [String] = []
    var i = range.lowerBound
    while i + 8 <= range.upperBound {
      var size = be(b, i, 4)
      let type = ascii(b, i + 4, 4)
      var header = 8
      if size == 1 {
        size = be(b, i + 8, 8)
        header = 16
      } else if size == 0 {
        size = range.upperBound - i
      }
      guard size >= header, i + size <= range.upperBound else { break }
      let body = (i + header)..<(i + size)
      switch type {
      // Full boxes (version and flags first) holding boxes.
      case "meta": found += boxes(b, (body.lowerBound + 4)..<body.upperBound)
      case "iinf":
        let version = b[body.lowerBound]
        found += boxes(b, (body.lowerBound + (version == 0 ? 6 : 8))..<body.upperBound)
      case "iprp", "ipco": found += boxes(b, body)
      case "infe":
        let version = b[body.lowerBound]
        // v2: item_ID (2), protection index (2), item_type; v3: item_ID (4).
        let itemType = ascii(b, body.lowerBound + 4 + (version >= 3 ? 4 : 2) + 2, 4)
        if itemType == "Exif" || itemType == "mime" { found.append("HEIF item \(itemType)") }
      case "colr":
        let kind = ascii(b, body.lowerBound, 4)
        if kind == "prof" || kind == "rICC" { found.append("HEIF colr \(kind)") }
      case "irot", "imir": found.append("HEIF \(type)")
      default: break
      }
      i += size
    }
    return found
  }
}

extension TestImages {
  /// A phone photo's metadata on a 40x20 JPEG whose pixels are sRGB (120, 200, 60) converted to
  /// Display P3 with that profile embedded: EXIF with orientation 6 (shown 20x40) and a GPS
  /// position, XMP with the position again, IPTC with a caption.
  public static func phoneJPEG() throws -> [UInt8] {
    let base = try Vips.solid(width: 40, height: 20, value: [120, 200, 60]).withProfile("p3").encoded(
      as: .jpeg, quality: 100, keepMetadata: true)
    // libvips' own APP1 (an EXIF it built) goes; ours comes first, after SOI.
    var rest: [UInt8] = []
    var i = 2
    while i + 4 <= base.count, base[i] == 0xFF, base[i + 1] != 0xDA {
      let length = Int(base[i + 2]) << 8 | Int(base[i + 3])
      if base[i + 1] != 0xE1 { rest += base[i..<(i + 2 + length)] }
      i += 2 + length
    }
    rest += base[i...]
    return [0xFF, 0xD8] + segment(0xE1, Array("Exif\0\0".utf8) + exifWithGPS(orientation: 6))
      + segment(0xE1, Array("http://ns.adobe.com/xap/1.0/\0".utf8) + Array(xmp.utf8))
      + segment(0xED, iptc) + rest
  }

  static func segment(_ marker: UInt8, _ payload: [UInt8]) -> [UInt8] {
    let length = payload.count + 2
    return [0xFF, marker, UInt8(length >> 8), UInt8(length & 0xFF)] + payload
  }

  /// A big-endian TIFF: IFD0 with Orientation and a GPS IFD pointer; the GPS IFD with version,
  /// latitude reference and latitude (52° 31' 0").
  static func exifWithGPS(orientation: UInt16) -> [UInt8] {
    func u16(_ v: Int) -> [UInt8] { [UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)] }
    func u32(_ v: Int) -> [UInt8] {
      [UInt8(v >> 24 & 0xFF), UInt8(v >> 16 & 0xFF), UInt8(v >> 8 & 0xFF), UInt8(v & 0xFF)]
    }
    func entry(_ tag: Int, _ type: Int, _ count: Int, _ value: [UInt8]) -> [UInt8] {
      u16(tag) + u16(type) + u32(count) + value + [UInt8](repeating: 0, count: 4 - value.count)
    }
    let ifd0 = 8
    let gps = ifd0 + 2 + 2 * 12 + 4
    let rationals = gps + 2 + 3 * 12 + 4
    var t: [UInt8] = Array("MM".utf8) + u16(42) + u32(ifd0)
    t += u16(2) + entry(0x0112, 3, 1, u16(Int(orientation))) + entry(0x8825, 4, 1, u32(gps)) + u32(0)
    t +=
      u16(3) + entry(0x0000, 1, 4, [2, 2, 0, 0]) + entry(0x0001, 2, 2, Array("N\0".utf8))
      + entry(0x0002, 5, 3, u32(rationals)) + u32(0)
    t += u32(52) + u32(1) + u32(31) + u32(1) + u32(0) + u32(1)
    return t
  }

  static let xmp = """
    <x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#">\
    <rdf:Description xmlns:exif="http://ns.adobe.com/exif/1.0/" exif:GPSLatitude="52,31.0N"/>\
    </rdf:RDF></x:xmpmeta>
    """

  /// Photoshop's IRB holding one IPTC dataset (2:120, the caption).
  static var iptc: [UInt8] {
    let caption = Array("at home".utf8)
    let record: [UInt8] = [0x1C, 0x02, 0x78, 0x00, UInt8(caption.count)] + caption
    let padded = record + (record.count % 2 == 1 ? [0] : [])
    let size = record.count
    return Array("Photoshop 3.0\0".utf8) + Array("8BIM".utf8) + [0x04, 0x04, 0x00, 0x00]
      + [UInt8(size >> 24 & 0xFF), UInt8(size >> 16 & 0xFF), UInt8(size >> 8 & 0xFF), UInt8(size & 0xFF)]
      + padded
  }
}
