import Foundation
import Larder
import LarderServer
import Synchronization
import Testing

/// A write lands only on the row the policy judged: if another writer replaced the object
/// between the decision and the write, the answer is 412 and the other writer's object stays.
@Suite struct DecisionPinningTests {
  /// Allows everything; when armed, the next delete or metadata update decision on a stored
  /// object replaces that object behind the request's back. (Uploads are judged inside their
  /// write transaction, where no other writer can get in, so they are not raced here.)
  final class ReplacingPolicy: AccessPolicy, Sendable {
    struct State {
      var larder: Larder?
      var armed = false
      var replacements = 0
    }
    let state = Mutex(State())

    func arm() { state.withLock { $0.armed = true } }

    func decide(_ request: AccessRequest) -> AccessDecision {
      guard request.operation == .update || request.operation == .delete, request.resource != nil,
        request.incoming.map({ $0.generation != 0 }) ?? true
      else { return .allow("ok") }
      let (larder, n): (Larder?, Int) = state.withLock { s in
        guard s.armed else { return (nil, 0) }
        s.armed = false
        s.replacements += 1
        return (s.larder, s.replacements)
      }
      if let larder {
        _ = try? larder.objects.put(
          bucket: request.bucket, name: request.name, data: Data("replaced-\(n)".utf8))
      }
      return .allow("ok")
    }
  }

  @Test func writesJudgedOnAReplacedObjectAnswer412AndChangeNothing() throws {
    let policy = ReplacingPolicy()
    try withInProcessService(policy: .custom(policy)) { s in
      policy.state.withLock { $0.larder = s.service.larder }
      try s.upload("judged", Array("original".utf8))
      func stored() throws -> (String, [String: String]) {
        let object = try s.service.larder.objects.get(bucket: "app", name: "judged")
        return (
          String(decoding: try s.service.larder.files.data(of: object.file), as: UTF8.self), object.metadata
        )
      }

      policy.arm()
      let delete = try s.send(.init("DELETE", "/v0/b/app/o/judged"))
      #expect(delete.status == 412)
      #expect(try stored().0 == "replaced-1")

      policy.arm()
      let patch = try s.send(
        .init("PATCH", "/v0/b/app/o/judged", body: Array(#"{"metadata":{"k":"v"}}"#.utf8)))
      #expect(patch.status == 412)
      #expect(try stored() == ("replaced-2", [:]))

      // Unraced, the same requests go through.
      #expect(
        try s.send(.init("PATCH", "/v0/b/app/o/judged", body: Array(#"{"metadata":{"k":"v"}}"#.utf8))).status
          == 200)
      #expect(try stored() == ("replaced-2", ["k": "v"]))
      #expect(try s.send(.init("POST", "/v0/b/app/o?name=judged", body: Array("mine".utf8))).status == 200)
      #expect(try stored().0 == "mine")
      #expect(try s.send(.init("DELETE", "/v0/b/app/o/judged")).status == 204)
      #expect(try s.service.larder.objects.find(bucket: "app", name: "judged") == nil)
    }
  }
}

/// The policy's last say on an upload happens inside the write, about the row it replaces.
@Suite struct AdmissionStepTests {
  /// Records, for each final decision on an upload (it knows the md5), the generation it judged.
  final class RecordingPolicy: AccessPolicy, Sendable {
    let judged = Mutex<[Int64?]>([])
    func decide(_ request: AccessRequest) -> AccessDecision {
      if let incoming = request.incoming, !incoming.md5Hash.isEmpty, incoming.generation == 0 {
        judged.withLock { $0.append(request.resource?.generation) }
        if incoming.size == 3 { return .deny("three bytes are not allowed") }
      }
      return .allow("ok")
    }
  }

  @Test func uploadsAreJudgedOnTheRowTheyReplace() throws {
    let policy = RecordingPolicy()
    try withInProcessService(policy: .custom(policy)) { s in
      let first = try s.upload("a", [1, 2])
      let generation = try #require(Int64(first["generation"] as? String ?? ""))
      let second = try s.upload("a", [1, 2, 3, 4])
      #expect(policy.judged.withLock { $0 } == [nil, generation])
      let refused = try s.send(.init("POST", "/v0/b/app/o?name=a", body: [9, 9, 9]))
      #expect(refused.status == 403)
      #expect(refused.error?["message"] as? String == "permission denied")
      let stored = try s.service.larder.objects.get(bucket: "app", name: "a")
      #expect(String(stored.generation) == second["generation"] as? String)
      #expect(try s.service.larder.files.data(of: stored.file) == Data([1, 2, 3, 4]))
      #expect(s.tmpEntries().isEmpty)
    }
  }
}
