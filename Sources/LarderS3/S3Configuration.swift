import Foundation

/// Where the blobs live: a bucket, the endpoint that serves it, its region and addressing style.
///
/// Parsed from the form users write on the command line:
/// ```swift
/// let c = try S3Configuration(url: "s3://larder?endpoint=http://127.0.0.1:18080&region=us-east-1&path-style=1")
/// ```
/// Without `endpoint`, AWS's regional endpoint is used; without `region`, `us-east-1`.
/// Credentials never appear here (see ``S3Credentials``): URLs end up in logs and `ps`.
public struct S3Configuration: Sendable, Equatable {
  public var bucket: String
  /// Scheme, host and port, no path: `http://127.0.0.1:18080`.
  public var endpoint: String
  public var region: String
  /// Bucket in the path (`/bucket/key`) rather than in the host name (`bucket.host/key`); what
  /// MinIO, Ceph RGW and Swift on one host need.
  public var pathStyle: Bool

  public init(bucket: String, endpoint: String, region: String = "us-east-1", pathStyle: Bool = true) {
    self.bucket = bucket
    self.endpoint = endpoint
    self.region = region
    self.pathStyle = pathStyle
  }

  /// - Throws: ``S3ConfigurationError`` naming what is wrong.
  public init(url: String) throws {
    guard let components = URLComponents(string: url), components.scheme == "s3" else {
      throw S3ConfigurationError("expected s3://BUCKET?endpoint=URL&region=R&path-style=1, got \(url)")
    }
    guard let bucket = components.host, !bucket.isEmpty, components.path.isEmpty || components.path == "/",
      components.user == nil, components.password == nil
    else {
      throw S3ConfigurationError("the URL must name a bucket and nothing else before '?': \(url)")
    }
    guard bucket.utf8.count >= 3, bucket.utf8.count <= 63,
      bucket.allSatisfy({ $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-" || $0 == ".") })
    else {
      throw S3ConfigurationError("invalid bucket name '\(bucket)' (3-63 of a-z 0-9 . -)")
    }
    var region = "us-east-1"
    var endpoint: String?
    var pathStyle: Bool?
    for item in components.queryItems ?? [] {
      let value = item.value ?? ""
      switch item.name {
      case "region":
        guard !value.isEmpty else { throw S3ConfigurationError("region is empty") }
        region = value
      case "endpoint":
        guard let e = URLComponents(string: value), e.scheme == "http" || e.scheme == "https", e.host != nil,
          e.path.isEmpty || e.path == "/", e.query == nil, e.user == nil
        else { throw S3ConfigurationError("endpoint must be http(s)://host[:port], got '\(value)'") }
        endpoint = value.hasSuffix("/") ? String(value.dropLast()) : value
      case "path-style":
        switch value {
        case "1", "true": pathStyle = true
        case "0", "false": pathStyle = false
        default: throw S3ConfigurationError("path-style must be 1 or 0, got '\(value)'")
        }
      default:
        throw S3ConfigurationError("unknown setting '\(item.name)' (known: endpoint, region, path-style)")
      }
    }
    self.init(
      bucket: bucket, endpoint: endpoint ?? "https://s3.\(region).amazonaws.com", region: region,
      pathStyle: pathStyle ?? (endpoint != nil))
  }

  /// The URL of `key` in the bucket (`key` nil: the bucket itself), with a query already in
  /// SigV4's canonical form (sorted, encoded), because libcurl 7.88 signs the query as given.
  func url(key: String?, query: [(String, String)] = []) -> String {
    var base: String
    if pathStyle {
      base = "\(endpoint)/\(bucket)"
    } else {
      let schemeEnd = endpoint.range(of: "://")!.upperBound
      base = String(endpoint[..<schemeEnd]) + bucket + "." + String(endpoint[schemeEnd...])
    }
    if let key { base += "/" + S3Encoding.encode(key, keepSlash: true) } else if !pathStyle { base += "/" }
    guard !query.isEmpty else { return base }
    var pairs: [(name: String, value: String)] = []
    for (name, value) in query {
      pairs.append((S3Encoding.encode(name, keepSlash: false), S3Encoding.encode(value, keepSlash: false)))
    }
    pairs.sort { (a, b) -> Bool in a.name == b.name ? a.value < b.value : a.name < b.name }
    let joined: [String] = pairs.map { pair -> String in pair.name + "=" + pair.value }
    return base + "?" + joined.joined(separator: "&")
  }
}

/// A `--blobs` value that cannot be used.
public struct S3ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
  public var description: String
  public init(_ description: String) { self.description = description }
}

/// SigV4's URI encoding: every byte but `A-Z a-z 0-9 - . _ ~` (and `/` in paths) as `%XX`.
enum S3Encoding {
  static func encode(_ string: String, keepSlash: Bool) -> String {
    var out = ""
    out.reserveCapacity(string.utf8.count)
    for byte in string.utf8 {
      switch byte {
      case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
        UInt8(ascii: "~"):
        out.unicodeScalars.append(Unicode.Scalar(byte))
      case UInt8(ascii: "/") where keepSlash:
        out.append("/")
      default:
        out += "%" + String(byte, radix: 16, uppercase: true).leftPadded(to: 2)
      }
    }
    return out
  }
}

extension String {
  fileprivate func leftPadded(to width: Int) -> String {
    count >= width ? self : String(repeating: "0", count: width - count) + self
  }
}
