import Foundation
import LarderAuth
import LarderCrypto
import Testing

/// V4 signed URLs (`GOOG4-RSA-SHA256`) against fixed vectors made by google-cloud-storage 3.17.1's
/// own signer (`_signing.generate_signed_url_v4` with `_request_timestamp="20261202T080000Z"`, the
/// string to sign captured from `Credentials.sign_bytes`) with an `openssl genpkey` RSA key.
struct SignedURLTests {
  static let publicKeyPEM = """
    -----BEGIN PUBLIC KEY-----
    MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAuWCBu9DA6AKdHbh26f55
    so6nilgaCzaLHGF2zp29zUdfc5sU6GZ89FlbmwkBXFah8Qyg00I3TCBNJK2Dn6dn
    aHsHmq6pUJMyJTxVB334sq+iO6jhG0c/ZFl3YViZAHm5cVUbphXGvDmfInytY9MW
    5mRh0GoouqOUSgF7mlobkNzDXStE/4mO4hGBhUooa43OUBng9c9e4aGWQEqQFPsZ
    1quWIIBhUnwxwehcr7FqucNpHARqstWgCwRHhUJ54K8SRMMkfam1Nt5XVOpuCm/a
    j+0MB6XCE8IUEbS9gycxK5garI9p6WkTIsquszCQYn3p6K5O50zy7T1phAKI6XN9
    +QIDAQAB
    -----END PUBLIC KEY-----
    """

  struct Vector: Sendable, CustomTestStringConvertible {
    var testDescription: String { method }
    let method: String
    let url: String
    let contentType: String?
    let stringToSign: String
  }

  static let vectors = [
    Vector(
      method: "GET",
      url:
        "http://127.0.0.1:8080/demo-bucket/photos/a%20b%2B%C3%BC~%25.txt?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=fixture%40larder.iam.larder%2F20261202%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20261202T080000Z&X-Goog-Expires=3600&X-Goog-SignedHeaders=host&X-Goog-Signature=347cdbbe51c8d4ad2a48cee577ceb7839e65b729055c4be86dd26c8a5def97b987ad6e2b8106b0524aacbcfb383dea73839d98987ed74e32064354b884b0c7f4b70e15728ff3a28c6517b769a683a6125e3ddc3a8bcf2143c18420e878e6a88e0fd0524ffaa3ffe2ae8d9fa8c32d99003826addd5c7d3cc5363d328a5e5480a83464931c7a6dc82e67cc38588b61a741f706911a1a35ea1c1d0ffdb46ca0c78ec9bfa07db730debcbfb12f78d934d42fc2c55ea6badcd516f6ccf955104c6241c2a9d65e8119a07c2c574ba1e135f5740341fa4fecbf477c9363f605a39221dfaeac5a00889902264afdf8c915c1c7352ac7c32843a72dc2bf7188338f62ee9e",
      contentType: nil,
      stringToSign:
        "GOOG4-RSA-SHA256\n20261202T080000Z\n20261202/auto/storage/goog4_request\nbaf10246c7f0e9d49dfd9f3de80ba3b9efdc6109fe1e4374cf37ca4eb9d18041"
    ),
    Vector(
      method: "PUT",
      url:
        "http://127.0.0.1:8080/demo-bucket/up/x.bin?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=fixture%40larder.iam.larder%2F20261202%2Fauto%2Fstorage%2Fgoog4_request&X-Goog-Date=20261202T080000Z&X-Goog-Expires=3600&X-Goog-SignedHeaders=content-type%3Bhost&X-Goog-Signature=6a3f56930db52bd0d998a73372502ab6ea466dbe5e9c3781802218dba9c47be1ca0f090f2e79807c4378e86093d64f4b3ba5cb042983cd258c7c27ed6f34ff2a1fc8d1c7b5eab4caba3599eb5de1bb683ad9f86899e3eaaff0d9015fc63925a75180a8fb77e602c71bae9d695b61ad126e3f3f6867ad2560fdd11f8b9c51226f7c7031e544880464bfb5beed0a9ebc98ef6de9c30d8f50928996c4c2fd3876e6b7450a28c05f515cffcd85ff69491fcc7f3aa021296c4344cc63f0c0fd2ca0df94f74ccc99ca061eef26b8c9ba3ffc60cf0a07fa993e4cca2eeaaade965aa8c03b43354dd5a486b618f84752613280bdac76e84223f5bd6d141a9f28dbd9c846",
      contentType: "text/plain",
      stringToSign:
        "GOOG4-RSA-SHA256\n20261202T080000Z\n20261202/auto/storage/goog4_request\nfc25ecb762adec973e842f74a1bf8eb38ca641fbacc4cb357ddb5b78fe512aeb"
    ),
  ]

  /// The request a vector's URL makes: path decoded, query decoded, host and content type headers.
  static func parts(_ vector: Vector) -> (
    path: String, query: [(name: String, value: String)], headers: [String: String]
  ) {
    let components = URLComponents(string: vector.url)!
    let query = (components.percentEncodedQueryItems ?? []).map {
      (name: $0.name.removingPercentEncoding!, value: ($0.value ?? "").removingPercentEncoding!)
    }
    var headers = ["host": "127.0.0.1:8080"]
    if let type = vector.contentType { headers["content-type"] = type }
    return (components.percentEncodedPath.removingPercentEncoding!, query, headers)
  }

  static func key() throws -> PublicKey { try PublicKey.allFromPEM(Array(publicKeyPEM.utf8))[0] }
  /// Inside the vectors' hour.
  static let now = Date(timeIntervalSince1970: 1_796_198_400 + 600)  // 2026-12-02T08:10:00Z

  @Test(arguments: vectors) func canonicalRequestMatchesGoogleCloudStorage(_ vector: Vector) throws {
    let (path, query, headers) = Self.parts(vector)
    let canonical = GoogleV4Signing.canonicalRequest(
      method: vector.method, path: path, query: query.filter { $0.name != "X-Goog-Signature" },
      headers: headers.map { (name: $0.key, value: $0.value) })
    let toSign = GoogleV4Signing.stringToSign(
      timestamp: "20261202T080000Z", credentialScope: "20261202/auto/storage/goog4_request",
      canonicalRequest: canonical)
    #expect(toSign == vector.stringToSign)
  }

  @Test(arguments: vectors) func googleSignedURLVerifies(_ vector: Vector) throws {
    let (path, query, headers) = Self.parts(vector)
    #expect(try SignedURLVerifier.credentialEmail(query) == "fixture@larder.iam.larder")
    let expires = try SignedURLVerifier.verify(
      method: vector.method, path: path, query: query, header: { headers[$0] }, keys: [Self.key()],
      now: Self.now)
    #expect(expires == Date(timeIntervalSince1970: 1_796_198_400 + 3600))
  }

  @Test(arguments: vectors) func tamperedExpiredAndMisusedURLsAreRefused(_ vector: Vector) throws {
    let (path, query, headers) = Self.parts(vector)
    let key = try Self.key()
    func check(
      method: String? = nil, path p: String? = nil, query q: [(name: String, value: String)]? = nil,
      headers h: [String: String]? = nil, keys: [PublicKey]? = nil, now: Date = Self.now
    ) throws(SignedURLError) {
      _ = try SignedURLVerifier.verify(
        method: method ?? vector.method, path: p ?? path, query: q ?? query, header: { (h ?? headers)[$0] },
        keys: keys ?? [key], now: now)
    }
    #expect(throws: SignedURLError.signatureMismatch) {
      try check(method: vector.method == "GET" ? "PUT" : "GET")
    }
    #expect(throws: SignedURLError.signatureMismatch) { try check(path: path + "x") }
    #expect(throws: SignedURLError.signatureMismatch) {
      try check(headers: headers.merging(["host": "evil.example"]) { $1 })
    }
    let longer = query.map { $0.name == "X-Goog-Expires" ? (name: $0.name, value: "7200") : $0 }
    #expect(throws: SignedURLError.signatureMismatch) { try check(query: longer) }
    #expect(throws: SignedURLError.signatureMismatch) {
      try check(query: query + [(name: "extra", value: "1")])
    }
    #expect(throws: SignedURLError.expired(expiredAt: Date(timeIntervalSince1970: 1_796_198_400 + 3600))) {
      try check(now: Self.now.addingTimeInterval(3600))
    }
    #expect(throws: SignedURLError.notYetValid) { try check(now: Self.now.addingTimeInterval(-3600)) }
    #expect(throws: SignedURLError.unknownAccount("fixture@larder.iam.larder")) { try check(keys: []) }
    let other = try PrivateKey.generateRSA().publicKey()
    #expect(throws: SignedURLError.signatureMismatch) { try check(keys: [other]) }
    let week = query.map { $0.name == "X-Goog-Expires" ? (name: $0.name, value: "604801") : $0 }
    #expect(throws: SignedURLError.self) { try check(query: week) }
  }

  @Test func encodingIsRFC3986() {
    #expect(GoogleV4Signing.encode("a b+ü~%/") == "a%20b%2B%C3%BC~%25%2F")
    #expect(GoogleV4Signing.encode("a b/c", keepingSlashes: true) == "a%20b/c")
  }

  /// A URL's signature over `host` made with a fresh key, as Larder's own signing code makes it.
  static func sign(host: String, key: PrivateKey) throws -> (
    query: [(name: String, value: String)], path: String
  ) {
    let path = "/demo-bucket/photos/a.txt"
    var query: [(name: String, value: String)] = [
      ("X-Goog-Algorithm", "GOOG4-RSA-SHA256"),
      ("X-Goog-Credential", "fixture@larder.iam.larder/20261202/auto/storage/goog4_request"),
      ("X-Goog-Date", "20261202T080000Z"), ("X-Goog-Expires", "3600"), ("X-Goog-SignedHeaders", "host"),
    ]
    let canonical = GoogleV4Signing.canonicalRequest(
      method: "GET", path: path, query: query, headers: [("host", host)])
    let toSign = GoogleV4Signing.stringToSign(
      timestamp: "20261202T080000Z", credentialScope: "20261202/auto/storage/goog4_request",
      canonicalRequest: canonical)
    query.append(("X-Goog-Signature", Hex.encode(try key.signRS256(Array(toSign.utf8)))))
    return (query, path)
  }

  /// Node's signer signs `host` as the host name without the port the URL has.
  @Test func aSignatureOverTheHostWithoutItsPortVerifiesAndNothingElseIsLoosened() throws {
    let key = try PrivateKey.generateRSA()
    let publicKey = try key.publicKey()
    func verify(signedHost: String, requestHost: String, path: String? = nil) throws {
      let (query, signedPath) = try Self.sign(host: signedHost, key: key)
      _ = try SignedURLVerifier.verify(
        method: "GET", path: path ?? signedPath, query: query, header: { $0 == "host" ? requestHost : nil },
        keys: [publicKey], now: Self.now)
    }
    for (signed, request) in [
      ("127.0.0.1", "127.0.0.1:8080"), ("127.0.0.1:8080", "127.0.0.1:8080"), ("127.0.0.1", "127.0.0.1"),
      ("[::1]", "[::1]:8080"), ("larder.test", "larder.test:443"),
    ] {
      #expect(throws: Never.self, "\(signed) for \(request)") {
        try verify(signedHost: signed, requestHost: request)
      }
    }
    for (signed, request) in [
      ("127.0.0.1:9090", "127.0.0.1:8080"), ("127.0.0.1:8080", "127.0.0.1"), ("evil.test", "127.0.0.1:8080"),
      ("127.0.0", "127.0.0.1:8080"), ("127.0.0.1", "127.0.0.1:8080:1"), ("127.0.0.1", "127.0.0.1:"),
      ("[::1]:8080", "[::1]"), ("::1", "[::1]:8080"),
    ] {
      #expect(throws: SignedURLError.signatureMismatch, "\(signed) for \(request)") {
        try verify(signedHost: signed, requestHost: request)
      }
    }
    // Another path under a host-without-port signature: still refused.
    #expect(throws: SignedURLError.signatureMismatch) {
      try verify(signedHost: "127.0.0.1", requestHost: "127.0.0.1:8080", path: "/demo-bucket/photos/b.txt")
    }
  }
}
