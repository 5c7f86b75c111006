import Foundation
import Testing

@testable import LarderS3

/// `--blobs s3://…` parsing, request addressing and credentials; no store needed.
struct ConfigurationTests {
  @Test func fullURLIsParsed() throws {
    let c = try S3Configuration(
      url: "s3://larder?endpoint=http://127.0.0.1:18080&region=eu-west-3&path-style=1")
    #expect(
      c
        == S3Configuration(
          bucket: "larder", endpoint: "http://127.0.0.1:18080", region: "eu-west-3", pathStyle: true))
  }

  @Test func defaultsAreAWSVirtualHosted() throws {
    let c = try S3Configuration(url: "s3://my-bucket")
    #expect(
      c
        == S3Configuration(
          bucket: "my-bucket", endpoint: "https://s3.us-east-1.amazonaws.com", region: "us-east-1",
          pathStyle: false))
    #expect(c.url(key: "sha256/ab/cd/ef") == "https://my-bucket.s3.us-east-1.amazonaws.com/sha256/ab/cd/ef")
    #expect(
      c.url(key: nil, query: [("list-type", "2")])
        == "https://my-bucket.s3.us-east-1.amazonaws.com/?list-type=2")
  }

  @Test(arguments: [
    "http://bucket", "s3://", "s3://Bucket", "s3://b", "s3://bucket/path", "s3://bucket?endpoint=ftp://h",
    "s3://bucket?endpoint=http://h/base", "s3://bucket?path-style=yes", "s3://bucket?secret=x",
    "s3://bucket?region=",
    "s3://key:secret@bucket",
  ])
  func badURLsAreRefused(url: String) {
    #expect(throws: S3ConfigurationError.self) { try S3Configuration(url: url) }
  }

  @Test func pathStyleURLsEncodeKeysAndSortTheQuery() throws {
    let c = try S3Configuration(url: "s3://larder?endpoint=http://h:9&path-style=1")
    #expect(c.url(key: "a b/ü+~") == "http://h:9/larder/a%20b/%C3%BC%2B~")
    #expect(
      c.url(key: "k", query: [("uploadId", "x/y=z"), ("partNumber", "2")])
        == "http://h:9/larder/k?partNumber=2&uploadId=x%2Fy%3Dz")
    #expect(c.url(key: "k", query: [("uploads", "")]) == "http://h:9/larder/k?uploads=")
  }

  @Test func credentialsComeFromTheEnvironment() throws {
    let c = try S3Credentials.resolve(environment: [
      "AWS_ACCESS_KEY_ID": "id", "AWS_SECRET_ACCESS_KEY": "secret",
    ])
    #expect(c == S3Credentials(accessKeyID: "id", secretAccessKey: "secret"))
    #expect(throws: S3ConfigurationError.self) {
      try S3Credentials.resolve(environment: ["AWS_ACCESS_KEY_ID": "id"])
    }
  }

  @Test func credentialsFileTakesTheProfileSection() throws {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("creds-\(UUID().uuidString)")
      .path
    defer { unlink(path) }
    let text = """
      # a comment
      [other]
      aws_access_key_id = wrong
      aws_secret_access_key = wrong
      [default]
      aws_access_key_id = test:tester
      aws_secret_access_key = testing
      """
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    // The file wins over the environment when it is named.
    let c = try S3Credentials.resolve(file: path, environment: ["AWS_ACCESS_KEY_ID": "env"])
    #expect(c == S3Credentials(accessKeyID: "test:tester", secretAccessKey: "testing"))
    #expect(try S3Credentials.load(file: path, profile: "other").accessKeyID == "wrong")
    #expect(throws: S3ConfigurationError.self) { try S3Credentials.load(file: path, profile: "absent") }
    #expect(throws: S3ConfigurationError.self) { try S3Credentials.load(file: path + ".missing") }
  }

  @Test func transientErrorsAreTheRetryableOnes() {
    func http(_ status: Int, _ code: String? = nil) -> S3Error {
      S3Error(.http(status: status, code: code, message: nil), operation: "PutObject", key: "k")
    }
    #expect(http(500).isTransient)
    #expect(http(503, "SlowDown").isTransient)
    #expect(http(400, "RequestTimeout").isTransient)
    #expect(!http(400, "BadDigest").isTransient)
    #expect(!http(403, "SignatureDoesNotMatch").isTransient)
    #expect(!http(404, "NoSuchKey").isTransient)
    #expect(S3Error(.timeout, operation: "GetObject", key: nil).isTransient)
    #expect(S3Error(.transport(curlCode: 56), operation: "GetObject", key: nil).isTransient)
    #expect(!S3Error(.local, operation: "PutObject", key: "k").isTransient)
    #expect(http(403, "AccessDenied").description == "S3 PutObject k: HTTP 403 AccessDenied")
  }
}
