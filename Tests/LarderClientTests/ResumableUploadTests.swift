import Foundation
import LarderClient
import LarderHTTP
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

@Suite struct ResumableUploadTests {
  @Test func twentyMiBInOneMiBChunksArrivesIntact() async throws {
    try await withServer { server, client in
      let mib = 1 << 20
      let bytes = testBytes(20 * mib + 123, seed: 11)
      let file = try server.file(bytes, named: "video.bin")
      let progress = Recorder<[Int64]>()
      let meta = try await client.upload(
        fileAt: file, name: "videos/v1.bin", contentType: "application/x-video", metadata: ["Owner": "ada"],
        chunkSize: mib, progress: { sent, total in progress.append([sent, total]) })
      #expect(meta.name == "videos/v1.bin")
      #expect(meta.size == Int64(bytes.count))
      #expect(meta.contentType == "application/x-video")
      #expect(meta.metadata == ["Owner": "ada"])  // tus metadata keeps the key's case
      let total = Int64(bytes.count)
      let expected = [[0, total]] + (1...20).map { [Int64($0 * mib), total] } + [[total, total]]
      #expect(progress.all == expected)
      let downloaded = try await client.download(name: "videos/v1.bin")
      #expect(downloaded.count == bytes.count)
      #expect(downloaded == bytes)
    }
  }

  @Test func resumeContinuesWhereAnInterruptedUploadStopped() async throws {
    try await withServer { server, client in
      let mib = 1 << 20
      let bytes = testBytes(3 * mib + 7, seed: 5)
      let file = try server.file(bytes)
      // Another process (or this app before it crashed) created the upload and sent a part.
      let created = try await rawRequest(
        "POST", server.baseURL.appendingPathComponent("v0/b/app/uploads"),
        headers: [
          "Tus-Resumable": "1.0.0", "Upload-Length": String(bytes.count),
          "Upload-Metadata": "name \(Data("docs/resumed.bin".utf8).base64EncodedString())",
        ])
      #expect(created.statusCode == 201)
      let location = try #require(
        created.value(forHTTPHeaderField: "Location").flatMap { URL(string: $0, relativeTo: server.baseURL)?.absoluteURL })
      let sent = mib + 5
      let patched = try await rawRequest(
        "PATCH", location,
        headers: ["Tus-Resumable": "1.0.0", "Upload-Offset": "0", "Content-Type": "application/offset+octet-stream"],
        body: bytes.prefix(sent))
      #expect(patched.statusCode == 204)
      #expect(patched.value(forHTTPHeaderField: "Upload-Offset") == String(sent))

      let progress = Recorder<Int64>()
      let meta = try await client.resumeUpload(
        location: location, fileAt: file, chunkSize: mib, progress: { done, _ in progress.append(done) })
      #expect(meta.name == "docs/resumed.bin")
      #expect(meta.size == Int64(bytes.count))
      #expect(progress.all == [Int64(sent), Int64(sent + mib), Int64(sent + 2 * mib), Int64(bytes.count)])
      #expect(try await client.download(name: "docs/resumed.bin") == bytes)

      // Resuming a finished upload sends nothing and answers the object.
      let again = try await client.resumeUpload(location: location, fileAt: file)
      #expect(again == meta.withoutTokens(keeping: again))
    }
  }

  @Test func createThenResumeWithTheClientAlone() async throws {
    try await withServer { server, client in
      let bytes = testBytes(300_001, seed: 9)
      let file = try server.file(bytes, named: "photo.raw")
      let location = try await client.createUpload(fileAt: file, name: "photos/p.raw", contentType: "image/x-raw")
      let meta = try await client.resumeUpload(location: location, fileAt: file, chunkSize: 100_000)
      #expect(meta.name == "photos/p.raw")
      #expect(meta.contentType == "image/x-raw")
      #expect(meta.size == 300_001)
      #expect(try await client.download(name: "photos/p.raw") == bytes)
    }
  }

  @Test func resumeWithAFileOfAnotherSizeIsRefused() async throws {
    try await withServer { server, client in
      let file = try server.file(testBytes(1000))
      let location = try await client.createUpload(fileAt: file, name: "a")
      let other = try server.file(testBytes(999))
      await #expect(throws: LarderClientError.invalidArgument("the file has 999 bytes but the upload expects 1000")) {
        try await client.resumeUpload(location: location, fileAt: other)
      }
      try await client.cancelUpload(location: location)
      do throws(LarderClientError) {
        _ = try await client.resumeUpload(location: location, fileAt: file)
        Issue.record("a terminated upload resumed")
      } catch {
        #expect(error.httpStatus == 404)
      }
    }
  }

  @Test func emptyFileAndSingleRequestUploads() async throws {
    try await withServer { server, client in
      let empty = try server.file(Data())
      let e = try await client.upload(fileAt: empty, name: "empty")
      #expect(e.size == 0)
      #expect(try await client.download(name: "empty") == Data())

      let bytes = testBytes(70_000, seed: 2)
      let file = try server.file(bytes)
      let progress = Recorder<Int64>()
      let m = try await client.upload(fileAt: file, name: "whole", resumable: false, progress: { s, _ in progress.append(s) })
      #expect(m.size == 70_000)
      #expect(progress.all == [70_000])
      #expect(try await client.download(name: "whole") == bytes)
    }
  }

  @Test func reservedMetadataKeysAndMissingFilesAreRefused() async throws {
    try await withServer { server, client in
      let file = try server.file(testBytes(10))
      await #expect(throws: LarderClientError.invalidArgument("metadata key \"name\" is reserved by the upload itself")) {
        try await client.upload(fileAt: file, name: "a", metadata: ["name": "b"])
      }
      do throws(LarderClientError) {
        _ = try await client.upload(fileAt: server.directory.appendingPathComponent("missing"), name: "a")
        Issue.record("a missing file uploaded")
      } catch {
        guard case .file = error else { Issue.record("unexpected \(error)"); return }
      }
      #expect(try await client.list().items.isEmpty)
    }
  }
}

extension ObjectMetadata {
  /// `self` with `other`'s download tokens (the two answers may differ only there).
  func withoutTokens(keeping other: ObjectMetadata) -> ObjectMetadata {
    var copy = self
    copy.downloadTokens = other.downloadTokens
    return copy
  }
}

@Suite struct ResumableRetryTests {
  /// Another writer moves the upload on between two of the client's chunks: the client's next
  /// `PATCH` is at a stale offset (409, or the connection cut while it sends), so it asks the
  /// server with `HEAD` and continues from there.
  @Test func failedPatchIsFollowedByHeadAndTheRestOfTheFile() async throws {
    let server = try TestServer()
    defer { server.close() }
    let client = server.client(retryPolicy: RetryPolicy(maxAttempts: 4, initialDelay: .milliseconds(20)))
    defer { client.invalidate() }
    let mib = 1 << 20
    let bytes = testBytes(3 * mib, seed: 21)
    let file = try server.file(bytes)
    let location = try await client.createUpload(fileAt: file, name: "raced.bin")
    let progress = Recorder<Int64>()
    let interfered = Recorder<Int>()
    let meta = try await client.resumeUpload(location: location, fileAt: file, chunkSize: mib) { sent, _ in
      progress.append(sent)
      if sent == Int64(mib), interfered.all.isEmpty {
        interfered.append(
          blockingRequest(
            "PATCH", location,
            headers: [
              "Tus-Resumable": "1.0.0", "Upload-Offset": String(mib), "Content-Type": "application/offset+octet-stream",
            ], body: bytes[mib..<(2 * mib)]))
      }
    }
    #expect(interfered.all == [204])
    #expect(progress.all == [0, Int64(mib), Int64(2 * mib), Int64(3 * mib)])
    #expect(meta.size == Int64(3 * mib))
    #expect(try await client.download(name: "raced.bin") == bytes)
  }

  /// The server goes away after the first chunk: the client retries (`HEAD`, then `PATCH`) a
  /// bounded number of times and throws the transport error.
  @Test func retriesAreBoundedAndTheLastErrorIsThrown() async throws {
    let server = try TestServer()
    defer { server.close() }
    let client = server.client(retryPolicy: RetryPolicy(maxAttempts: 3, initialDelay: .milliseconds(10)))
    defer { client.invalidate() }
    let mib = 1 << 20
    let file = try server.file(testBytes(4 * mib, seed: 4))
    let location = try await client.createUpload(fileAt: file, name: "never.bin")
    let progress = Recorder<Int64>()
    do throws(LarderClientError) {
      _ = try await client.resumeUpload(location: location, fileAt: file, chunkSize: mib) { sent, _ in
        progress.append(sent)
        if sent == Int64(mib) { _ = server.service.stop(timeout: .seconds(30)) }
      }
      Issue.record("an upload to a stopped server completed")
    } catch {
      guard case .transport = error else { Issue.record("unexpected \(error)"); return }
    }
    #expect(progress.all == [0, Int64(mib)])
  }
}

/// A request that blocks the calling thread until answered (from inside a synchronous callback).
func blockingRequest(_ method: String, _ url: URL, headers: [String: String], body: Data) -> Int {
  let session = URLSession(configuration: .ephemeral)
  defer { session.invalidateAndCancel() }
  var request = URLRequest(url: url)
  request.httpMethod = method
  for (k, v) in headers { request.setValue(v, forHTTPHeaderField: k) }
  request.httpBody = body
  let status = Recorder<Int>()
  let done = DispatchSemaphore(value: 0)
  session.dataTask(with: request) { _, response, _ in
    status.append((response as? HTTPURLResponse)?.statusCode ?? -1)
    done.signal()
  }.resume()
  done.wait()
  return status.all.first ?? -1
}
