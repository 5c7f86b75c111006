import Foundation
import LarderClient
import LarderHTTP
import LarderServer
import Testing

@Suite struct ErrorTests {
  @Test func missingObjectIsNotFound() async throws {
    try await withServer { _, client in
      for call in ["metadata", "download", "delete"] {
        do throws(LarderClientError) {
          switch call {
          case "metadata": _ = try await client.metadata(name: "nope/x")
          case "download": _ = try await client.download(name: "nope/x", maxSize: 10)
          default: try await client.delete(name: "nope/x")
          }
          Issue.record("\(call) of a missing object succeeded")
        } catch {
          guard case .server(let e) = error else { Issue.record("\(call): unexpected \(error)"); continue }
          #expect(e.code == 404, "\(call)")
          #expect(e.status == "NOT_FOUND", "\(call)")
          #expect(error.httpStatus == 404)
          #expect(!e.message.isEmpty)
        }
      }
    }
  }

  @Test func denyAllPolicyIsPermissionDenied() async throws {
    try await withServer(policy: .custom(DenyAllPolicy())) { server, client in
      let expected = LarderClientError.server(
        LarderAPIError(code: 403, status: "PERMISSION_DENIED", message: "permission denied"))
      await #expect(throws: expected) { try await client.upload(Data("x".utf8), name: "a") }
      await #expect(throws: expected) { try await client.metadata(name: "a") }
      await #expect(throws: expected) { try await client.download(name: "a") }
      let file = try server.file(testBytes(3000))
      await #expect(throws: expected) { try await client.upload(fileAt: file, name: "a", chunkSize: 1000) }
    }
  }

  @Test func headerUnsafeMetadataIsRefusedBeforeSending() async throws {
    try await withServer { _, client in
      await #expect(throws: LarderClientError.invalidArgument("metadata \"k\" cannot travel as an HTTP header")) {
        try await client.upload(Data("x".utf8), name: "a", metadata: ["k": "v\r\nX-Injected: 1"])
      }
      await #expect(throws: LarderClientError.invalidArgument("metadata \"a b\" cannot travel as an HTTP header")) {
        try await client.upload(Data("x".utf8), name: "a", metadata: ["a b": "v"])
      }
      let items = try await client.list().items
      #expect(items.isEmpty)
    }
  }

  @Test func invalidNameIsInvalidArgument() async throws {
    try await withServer { _, client in
      do throws(LarderClientError) {
        _ = try await client.upload(Data("x".utf8), name: "")
        Issue.record("an empty name was accepted")
      } catch {
        guard case .server(let e) = error else { Issue.record("unexpected \(error)"); return }
        #expect(e.code == 400)
        #expect(e.status == "INVALID_ARGUMENT")
      }
    }
  }

  @Test func failingTokenProviderIsAnAuthenticationError() async throws {
    struct NoToken: Error, CustomStringConvertible { var description: String { "no token here" } }
    let server = try TestServer()
    defer { server.close() }
    let client = server.client(token: { throw NoToken() })
    defer { client.invalidate() }
    await #expect(throws: LarderClientError.authentication("no token here")) {
      try await client.metadata(name: "a")
    }
  }

  @Test func refusedConnectionIsATransportError() async throws {
    // Nothing listens on port 1 (tcpmux); a stopped test server's port could be reused by another suite.
    let client = LarderClient(baseURL: URL(string: "http://127.0.0.1:1")!, bucket: "app", timeout: 20)
    defer { client.invalidate() }
    do throws(LarderClientError) {
      _ = try await client.metadata(name: "a")
      Issue.record("port 1 answered")
    } catch {
      guard case .transport = error else { Issue.record("unexpected \(error)"); return }
      #expect(error.httpStatus == nil)
    }
  }
}
