import Foundation
import Testing

@testable import LarderS3

/// Transient failures are retried a bounded number of times, refusals never, and a multipart
/// upload whose part keeps failing is aborted. Against a canned server: a real store cannot be
/// made to fail on cue.
struct RetryTests {
  static func client(_ server: CannedHTTPServer, tuning: S3Client.Tuning = .init()) -> S3Client {
    S3Client(
      configuration: S3Configuration(bucket: "bucket", endpoint: "http://127.0.0.1:\(server.port)"),
      credentials: S3Credentials(accessKeyID: "id", secretAccessKey: "secret"), tuning: tuning)
  }

  static let slowDown = CannedHTTPServer.Response(
    status: 503, headers: ["Content-Type: application/xml"],
    body: "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>")

  @Test func transientAnswersAreRetriedUntilOneSucceeds() throws {
    let server = try CannedHTTPServer([
      Self.slowDown, Self.slowDown, .init(status: 200, headers: ["ETag: \"abc\""]),
    ])
    defer { server.stop() }
    let etag = try Self.client(server).put(.bytes([1, 2, 3]), key: "k")
    #expect(etag == "abc")
    #expect(server.requests == ["PUT /bucket/k", "PUT /bucket/k", "PUT /bucket/k"])
  }

  @Test func retriesAreBoundedAndTheLastErrorIsReported() throws {
    let server = try CannedHTTPServer([Self.slowDown])
    defer { server.stop() }
    let error = #expect(throws: S3Error.self) { try Self.client(server).put(.bytes([1]), key: "k") }
    #expect(error?.status == 503)
    #expect(error?.code == "SlowDown")
    #expect(error?.isTransient == true)
    #expect(server.requests.count == 3)
  }

  @Test func refusalsAreNotRetried() throws {
    let server = try CannedHTTPServer([
      .init(status: 403, body: "<Error><Code>AccessDenied</Code><Message>no</Message></Error>")
    ])
    defer { server.stop() }
    let error = #expect(throws: S3Error.self) { try Self.client(server).put(.bytes([1]), key: "k") }
    #expect(error?.status == 403)
    #expect(error?.code == "AccessDenied")
    #expect(server.requests == ["PUT /bucket/k"])
  }

  @Test func completeAnswering200WithAnErrorIsAnError() throws {
    let server = try CannedHTTPServer([
      .init(status: 200, body: "<Error><Code>InternalError</Code><Message>try again</Message></Error>")
    ])
    defer { server.stop() }
    let error = #expect(throws: S3Error.self) {
      try Self.client(server).completeMultipartUpload(
        key: "k", uploadID: "U", parts: [S3Part(number: 1, etag: "e", size: 1)])
    }
    #expect(error?.code == "InternalError")
    #expect(error?.status == 200)
    #expect(server.requests == ["POST /bucket/k?uploadId=U"])
  }

  @Test func failingPartAbortsTheUpload() throws {
    let server = try CannedHTTPServer([
      .multipartStarted(key: "k", uploadID: "U1"),
      .init(status: 500), .init(status: 500), .init(status: 500),
      .init(status: 204),
    ])
    defer { server.stop() }
    var tuning = S3Client.Tuning()
    tuning.multipartThreshold = 5 << 20
    tuning.partSize = 5 << 20
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("part-\(UUID().uuidString)").path
    defer { unlink(path) }
    #expect(FileManager.default.createFile(atPath: path, contents: Data(count: 6 << 20)))

    let error = #expect(throws: S3Error.self) {
      try Self.client(server, tuning: tuning).putFile(
        atPath: path, key: "k", sha256Hex: String(repeating: "0", count: 64))
    }
    #expect(error?.status == 500)
    #expect(error?.operation == "UploadPart")
    #expect(
      server.requests == [
        "POST /bucket/k?uploads=",
        "PUT /bucket/k?partNumber=1&uploadId=U1", "PUT /bucket/k?partNumber=1&uploadId=U1",
        "PUT /bucket/k?partNumber=1&uploadId=U1",
        "DELETE /bucket/k?uploadId=U1",
      ])
  }
}
