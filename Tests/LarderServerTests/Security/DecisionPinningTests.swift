import Foundation
import Larder
import LarderServer
import Synchronization
import Testing

/// A write lands only on the row the policy judged: if another writer replaced the object
/// between the decision and the write, the answer is 412 and the other writer's object stays.
@Suite struct DecisionPinningTests {
  /// Allows everything; when armed, the next write decision on a stored object (the final one
  /// of an upload, which knows the content's md5) replaces that object behind the request's back.
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
        request.incoming.map({ !$0.md5Hash.isEmpty }) ?? true
      else { return .allow("ok") }
      let (larder, n): (Larder?, Int) = state.withLock { s in
        guard s.armed else { return (nil, 0) }
        s.armed = false
        s.replacements += 1
        return (s.larder, s.replacements)
      }
      if let larder {
        _ = try? larder.objects.put(bucket: request.bucket, name: request.name, data: Data("replaced-\(n)".utf8))
      }
      return .allow("ok")
    }
  }

  @Test func writesJudgedOnAReplacedObjectAnswer412AndChangeNothing() throws {
    let policy = ReplacingPolicy()
    try withService(policy: .custom(policy)) { s in
      policy.state.withLock { $0.larder = s.service.larder }
      try s.upload("judged", Array("original".utf8))
      func stored() throws -> (String, [String: String]) {
        let object = try s.service.larder.objects.get(bucket: "app", name: "judged")
        return (String(decoding: try s.service.larder.files.data(of: object.file), as: UTF8.self), object.metadata)
      }

      policy.arm()
      let delete = try s.send(.init("DELETE", "/v0/b/app/o/judged"))
      #expect(delete.status == 412)
      #expect(try stored().0 == "replaced-1")

      policy.arm()
      let patch = try s.send(.init("PATCH", "/v0/b/app/o/judged", body: Array(#"{"metadata":{"k":"v"}}"#.utf8)))
      #expect(patch.status == 412)
      #expect(try stored() == ("replaced-2", [:]))

      policy.arm()
      let upload = try s.send(.init("POST", "/v0/b/app/o?name=judged", body: Array("mine".utf8)))
      #expect(upload.status == 412)
      #expect(try stored().0 == "replaced-3")

      // Unraced, the same requests go through.
      #expect(try s.send(.init("PATCH", "/v0/b/app/o/judged", body: Array(#"{"metadata":{"k":"v"}}"#.utf8))).status == 200)
      #expect(try stored() == ("replaced-3", ["k": "v"]))
      #expect(try s.send(.init("POST", "/v0/b/app/o?name=judged", body: Array("mine".utf8))).status == 200)
      #expect(try stored().0 == "mine")
      #expect(try s.send(.init("DELETE", "/v0/b/app/o/judged")).status == 204)
      #expect(try s.service.larder.objects.find(bucket: "app", name: "judged") == nil)
    }
  }
}
