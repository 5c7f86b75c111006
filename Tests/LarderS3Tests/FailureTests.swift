import Foundation
import LarderTestSupport
import Testing

@testable import LarderS3

/// What callers see when the store cannot be reached or does not answer: no engine needed.
struct ConnectionFailureTests {
  @Test func unreachableEndpointIsATransientErrorAtOnce() throws {
    // Port 1 on loopback: nothing listens, the connection is refused immediately.
    let client = S3Client(
      configuration: S3Configuration(bucket: "larder-test", endpoint: "http://127.0.0.1:1"),
      credentials: S3Credentials(accessKeyID: "a", secretAccessKey: "b"))
    let started = ContinuousClock.now
    let error = #expect(throws: S3Error.self) { try client.head("sha256/00/00/x") }
    #expect(error?.kind == .unreachable)
    #expect(error?.isTransient == true)
    #expect(error?.operation == "HeadObject")
    #expect(error?.key == "sha256/00/00/x")
    // Three attempts with 100 + 200 ms between them; far from any connect timeout.
    #expect(ContinuousClock.now - started < .seconds(3))
  }

  @Test func silentServerIsATransientTimeout() throws {
    // A socket that listens but never accepts: the connection completes in the kernel's
    // backlog, the request goes out, and no answer ever comes.
    let (listener, port) = try CannedHTTPServer.listen(backlog: 8)
    defer { close(listener) }
    var tuning = S3Client.Tuning()
    tuning.stallTimeoutSeconds = 1
    tuning.attempts = 1
    let client = S3Client(
      configuration: S3Configuration(
        bucket: "larder-test", endpoint: "http://127.0.0.1:\(port)"),
      credentials: S3Credentials(accessKeyID: "a", secretAccessKey: "b"), tuning: tuning)
    let error = #expect(throws: S3Error.self) { try client.head("sha256/00/00/x") }
    #expect(error?.kind == .timeout)
    #expect(error?.isTransient == true)
  }
}

/// What callers see when the store refuses them.
@Suite(.enabled(if: LoopbackS3.isAvailable))
struct RefusalTests {
  @Test func wrongSecretIsATyped403() throws {
    let engine = try LoopbackS3.engine()
    let s3 = try S3Fixture(
      credentials: S3Credentials(accessKeyID: engine.accessKeyID, secretAccessKey: "wrong"))
    defer { s3.cleanUp() }
    let key = s3.key("refused")
    let error = #expect(throws: S3Error.self) { try s3.client.put(.bytes([1]), key: key) }
    #expect(error?.status == 403)
    #expect(error?.code == "SignatureDoesNotMatch")
    #expect(error?.isTransient == false)
    let listing = #expect(throws: S3Error.self) { try s3.client.listPage(prefix: s3.prefix) }
    #expect(listing?.status == 403)
    #expect(try S3Fixture().client.head(key) == nil)
  }

  @Test func unknownAccessKeyIsATyped403() throws {
    let s3 = try S3Fixture(credentials: S3Credentials(accessKeyID: "nobody:here", secretAccessKey: "testing"))
    defer { s3.cleanUp() }
    let error = #expect(throws: S3Error.self) { try s3.client.listPage(prefix: s3.prefix) }
    #expect(error?.status == 403)
    // AWS names the unknown key; Swift's tempauth reports a signature it cannot match.
    #expect(["InvalidAccessKeyId", "SignatureDoesNotMatch"].contains(error?.code))
  }

  @Test func missingBucketIsATyped404() throws {
    let engine = try LoopbackS3.engine()
    var configuration = try S3Configuration(url: engine.url)
    configuration.bucket = "no-such-bucket-here"
    let client = S3Client(
      configuration: configuration,
      credentials: S3Credentials(accessKeyID: engine.accessKeyID, secretAccessKey: engine.secretAccessKey))
    let error = #expect(throws: S3Error.self) { try client.put(.bytes([1]), key: "k") }
    #expect(error?.status == 404)
    #expect(error?.code == "NoSuchBucket")
  }
}
