import Foundation
import Larder
import LarderCrypto
import LarderHTTP
import LarderServer
import LarderTestSupport
import Testing

/// Per-identity write quotas (issue 37, items 3 and 8) on a live server: the compose and tus
/// floods refused with 429 and `Retry-After` before anything is written, every write path
/// charged, admin identities exempt, the bucket refilling, and the refusals in `/metrics`.
@Suite struct WriteQuotaTests {
  static let MiB = 1 << 20

  static func bearer(_ s: LiveService, _ uid: String) -> (String, String) {
    ("Authorization", "Bearer \(s.service.developmentToken(uid: uid))")
  }

  static func bytes(_ count: Int, seed: UInt8 = 7) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ Int(seed)) }
  }

  /// The `Retry-After` of a 429, which must be there and positive.
  static func retryAfter(_ r: WireResponse, sourceLocation: SourceLocation = #_sourceLocation) -> Int? {
    #expect(r.status == 429, "\(r.status) \(r.text)", sourceLocation: sourceLocation)
    let seconds = r["Retry-After"].flatMap { Int($0) }
    #expect((seconds ?? 0) >= 1, "Retry-After: \(r["Retry-After"] ?? "none")", sourceLocation: sourceLocation)
    return seconds
  }

  static func metric(_ s: LiveService, _ line: String) throws -> Bool {
    let text = try s.send(.get("/metrics")).text
    return text.split(separator: "\n").contains { $0 == line }
  }

  // MARK: - the attacks

  /// Item 3: `compose` of 32 references to one 32 MiB object asks for a new 1 GiB blob in a
  /// request of about a kilobyte. Once the caller is over its quota it is refused whole, before
  /// a byte is copied: the store's bytes are unchanged.
  @Test func composeOfThirtyTwoReferencesIsRefusedBeforeWriting() throws {
    try withService(configure: { $0.quota = WriteQuota(bytesPerPeriod: 48 << 20) }) { s in
      let auth = Self.bearer(s, "mallory")
      let source = Self.bytes(32 * Self.MiB)
      let put = try s.send(GcsApiTests.media("big.bin", source, type: "application/octet-stream").with(auth))
      #expect(put.status == 200, "\(put.text)")
      let before = try s.service.larder.statistics()

      let sources = Array(repeating: #"{"name":"big.bin"}"#, count: 32).joined(separator: ",")
      let body = Array(
        #"{"sourceObjects":[\#(sources)],"destination":{"contentType":"application/octet-stream"}}"#.utf8)
      #expect(body.count < 1100)
      let r = try s.send(
        WireRequest(
          "POST", GcsApiTests.item("huge.bin") + "/compose",
          headers: [auth, ("Content-Type", "application/json")], body: body))
      // 16 MiB left of 48; 48 MiB (a full bucket) are needed for a write larger than the quota:
      // 32 MiB at 48 MiB per hour is 2,400 s.
      let seconds = try #require(Self.retryAfter(r))
      #expect((2390...2400).contains(seconds), "\(seconds)")
      #expect(r.error?["code"] as? Int == 429)
      let reason = (r.error?["errors"] as? [[String: Any]])?.first?["reason"] as? String
      #expect(reason == "rateLimitExceeded", "\(r.text)")
      #expect((r.error?["message"] as? String)?.contains("write quota exceeded") == true, "\(r.text)")

      let after = try s.service.larder.statistics()
      #expect(after.blobBytes == before.blobBytes)
      #expect(after.objectCount == before.objectCount)
      #expect(try s.send(.get(GcsApiTests.item("huge.bin"))).status == 404)
      #expect(try Self.metric(s, #"larder_quota_refusals_total{kind="bytes"} 1"#))
      #expect(try Self.metric(s, "larder_quota_admitted_bytes_total \(32 * Self.MiB)"))
    }
  }

  /// Item 8: 3,000 tus creations declaring 5 GiB each. Past the limit on uploads in progress
  /// every one is refused with 429 (and `Retry-After` until the first expires), and creates
  /// nothing: rows and files are exactly the limit. Another identity is not affected, and a
  /// terminated upload frees its slot.
  @Test func tusCreationsStopAtTheLimitOfUploadsInProgress() throws {
    try withService(configure: { $0.quota = WriteQuota(uploadsInProgress: 100) }) { s in
      let auth = Self.bearer(s, "mallory")
      var created: [String] = []
      var refused = 0
      for i in 0..<3000 {
        let r = try s.request(
          "POST", "/v0/b/app/uploads",
          headers: [
            LiveService.tus, auth, ("Upload-Length", String(5 << 30)),
            ("Upload-Metadata", LiveService.metadata([("name", "f\(i)")])),
          ])
        if r.status == 201, let location = r["Location"] {
          created.append(location)
        } else {
          refused += 1
          if refused == 1 {
            // Until the oldest of the 100 expires (the default expiry, 24 h).
            let seconds = try #require(Self.retryAfter(r))
            #expect((86_000...86_400).contains(seconds), "\(seconds)")
            #expect(r.error?["status"] as? String == "RESOURCE_EXHAUSTED", "\(r.text)")
            #expect(r["Tus-Resumable"] == "1.0.0")
          } else if r.status != 429 {
            Issue.record("creation \(i): \(r.status) \(r.text)")
          }
        }
      }
      #expect(created.count == 100)
      #expect(refused == 2900)
      #expect(try s.uploadRows() == 100)
      #expect(s.uploadFiles.count == 100)
      #expect(try Self.metric(s, #"larder_quota_refusals_total{kind="uploads"} 2900"#))

      // Per identity: someone else creates.
      #expect(try s.create(length: 10, name: "other", extra: [Self.bearer(s, "alice")]).isEmpty == false)
      // A terminated upload frees its slot (found at the next look-up, at most a second later).
      #expect(try s.request("DELETE", created[0], headers: [LiveService.tus, auth]).status == 204)
      Thread.sleep(forTimeInterval: 1.1)
      #expect(try s.create(length: 10, name: "again", extra: [auth]).isEmpty == false)
      let last = try s.request(
        "POST", "/v0/b/app/uploads",
        headers: [
          LiveService.tus, auth, ("Upload-Length", "10"),
          ("Upload-Metadata", LiveService.metadata([("name", "x")])),
        ])
      #expect(last.status == 429)
    }
  }

  // MARK: - every write path

  /// One way of writing `content` as `name` (nil: a path that writes no new bytes, only a row).
  enum WritePath: String, CaseIterable, CustomTestStringConvertible {
    case firebaseSimple, firebaseMultipart, firebaseResumable, tusPatch, tusCreationWithUpload,
      tusConcatenation
    case gcsMedia, gcsMultipart, gcsResumable, gcsCompose
    var testDescription: String { rawValue }
  }

  /// Writes `content` as `name` by `path` as `auth`, and returns the answer of the step that
  /// carries the bytes (the one a quota refuses). For compose and concatenation `content` is
  /// written once as a source, and the new object is two copies of it.
  static func write(
    _ path: WritePath, _ s: LiveService, _ name: String, _ content: [UInt8], _ auth: (String, String)
  ) throws -> WireResponse {
    switch path {
    case .firebaseSimple:
      return try s.send(WireRequest("POST", "/v0/b/app/o?name=\(enc(name))", headers: [auth], body: content))
    case .firebaseMultipart:
      return try s.send(FirebaseWire.multipart(name, content: content, extraHeaders: [auth]))
    case .firebaseResumable:
      let url = try s.startSession(name, length: content.count, headers: [auth])
      return try s.send(
        FirebaseWire.command(url, "upload, finalize", offset: 0, body: content, extraHeaders: [auth]))
    case .tusPatch:
      let location = try s.create(length: content.count, name: name, extra: [auth])
      return try s.patch(location, offset: 0, content, extra: [auth])
    case .tusCreationWithUpload:
      return try s.request(
        "POST", "/v0/b/app/uploads",
        headers: [
          LiveService.tus, LiveService.stream, auth, ("Upload-Length", String(content.count)),
          ("Upload-Metadata", LiveService.metadata([("name", name)])),
        ], body: content)
    case .tusConcatenation:
      let partial = try s.create(
        length: content.count, name: nil, extra: [auth, ("Upload-Concat", "partial")])
      let r = try s.patch(partial, offset: 0, content, extra: [auth])
      guard r.status == 204 else { return r }
      return try s.request(
        "POST", "/v0/b/app/uploads",
        headers: [
          LiveService.tus, auth, ("Upload-Concat", "final;\(partial) \(partial)"),
          ("Upload-Metadata", LiveService.metadata([("name", name)])),
        ])
    case .gcsMedia:
      return try s.send(GcsApiTests.media(name, content).with(auth))
    case .gcsMultipart:
      return try s.send(GcsApiTests.multipart(#"{"name":"\#(name)"}"#, content).with(auth))
    case .gcsResumable:
      let start = try s.send(
        WireRequest(
          "POST", "/upload/storage/v1/b/app/o?uploadType=resumable&name=\(enc(name))",
          headers: [auth, ("Content-Type", "application/json")], body: Array("{}".utf8)))
      guard start.status == 200, let location = start["Location"] else { return start }
      return try s.send(
        WireRequest(
          "PUT", FirebaseWire.target(of: location),
          headers: [auth, ("Content-Range", "bytes 0-\(content.count - 1)/\(content.count)")], body: content))
    case .gcsCompose:
      let source = try s.send(GcsApiTests.media(name + ".src", content).with(auth))
      guard source.status == 200 else { return source }
      let body = #"{"sourceObjects":[{"name":"\#(name).src"},{"name":"\#(name).src"}]}"#
      return try s.send(
        WireRequest(
          "POST", GcsApiTests.item(name) + "/compose", headers: [auth, ("Content-Type", "application/json")],
          body: Array(body.utf8)))
    }
  }

  /// What `path` charges for writing `content` once: the body (with its multipart wrapper),
  /// or, for compose and concatenation, the source once and the new object (two copies).
  static func charged(_ path: WritePath, _ content: Int) -> ClosedRange<Int> {
    switch path {
    case .gcsCompose, .tusConcatenation: 3 * content...3 * content
    case .firebaseMultipart, .gcsMultipart: content + 100...content + 400
    default: content...content
    }
  }

  /// Each write path is charged: with a quota of 1,000 bytes an hour, a 300-byte write is
  /// admitted, and the writes that follow are refused once the bucket is spent (429,
  /// `Retry-After`, the protocol's error shape), leaving nothing of theirs behind.
  @Test(arguments: WritePath.allCases)
  func everyWritePathIsCharged(_ path: WritePath) throws {
    try withService(configure: { $0.quota = WriteQuota(bytesPerPeriod: 1000) }) { s in
      let auth = Self.bearer(s, "mallory")
      let first = try Self.write(path, s, "first", Self.bytes(300), auth)
      #expect((200...204).contains(first.status), "\(first.status) \(first.text)")
      let blobs = try s.service.larder.statistics().blobBytes
      var refusal: WireResponse?
      for attempt in 0..<4 {
        let r = try Self.write(path, s, "next\(attempt)", Self.bytes(300, seed: UInt8(attempt + 1)), auth)
        if r.status == 429 {
          refusal = r
          break
        }
        #expect((200...204).contains(r.status), "\(r.status) \(r.text)")
      }
      let r = try #require(refusal, "never refused")
      let seconds = try #require(Self.retryAfter(r))
      #expect(seconds <= 3600)
      switch path {
      case .gcsMedia, .gcsMultipart, .gcsResumable, .gcsCompose:
        #expect(
          (r.error?["errors"] as? [[String: Any]])?.first?["reason"] as? String == "rateLimitExceeded",
          "\(r.text)")
      default:
        #expect(r.error?["status"] as? String == "RESOURCE_EXHAUSTED", "\(r.text)")
      }
      #expect(r.error?["code"] as? Int == 429)
      // The refused write stored nothing: at most what the admitted ones wrote, never a byte past the quota.
      #expect(try s.service.larder.statistics().blobBytes <= blobs + 1000)
      let text = try s.send(.get("/metrics")).text
      let admitted = text.split(separator: "\n").first { $0.hasPrefix("larder_quota_admitted_bytes_total ") }
        .flatMap { Int($0.split(separator: " ")[1]) }
      #expect((admitted ?? 0) <= 1000, "\(admitted ?? -1)")
      #expect((admitted ?? 0) >= Self.charged(path, 300).lowerBound, "\(admitted ?? -1)")
    }
  }

  /// An image variant rendered for a download is charged its bytes, and a render is refused
  /// while the caller's bucket is spent; cached variants cost nothing.
  @Test func imageVariantRendersAreCharged() throws {
    let png = try TestImages.solid(300, 300, as: .png)
    try withService(configure: { $0.quota = WriteQuota(bytesPerPeriod: Int64(png.count + 1)) }) { s in
      let auth = Self.bearer(s, "mallory")
      try s.upload("photo.png", png, headers: [auth, ("Content-Type", "image/png")])
      // One byte left: the first render is admitted and leaves the bucket in debt.
      let first = try s.send(.get("/v0/b/app/o/photo.png?alt=media&width=120", [auth]))
      #expect(first.status == 200, "\(first.text)")
      #expect(try Self.metric(s, "larder_quota_admitted_bytes_total \(png.count + first.body.count)"))
      // Cached: served again, not charged again.
      #expect(try s.send(.get("/v0/b/app/o/photo.png?alt=media&width=120", [auth])).status == 200)
      #expect(try Self.metric(s, "larder_quota_admitted_bytes_total \(png.count + first.body.count)"))
      let variants = try s.service.larder.statistics()
      _ = Self.retryAfter(try s.send(.get("/v0/b/app/o/photo.png?alt=media&width=80", [auth])))
      #expect(try s.service.larder.statistics().blobBytes == variants.blobBytes)
      #expect(try Self.metric(s, #"larder_quota_refusals_total{kind="bytes"} 1"#))
      // Someone else renders it.
      #expect(
        try s.send(.get("/v0/b/app/o/photo.png?alt=media&width=80", [Self.bearer(s, "alice")])).status == 200)
    }
  }

  /// A copy (and a rewrite) writes no bytes in a content-addressed store, only a row: it is
  /// not charged, even with the bucket spent.
  @Test func copyAndRewriteAreNotCharged() throws {
    try withService(configure: { $0.quota = WriteQuota(bytesPerPeriod: 1000) }) { s in
      let auth = Self.bearer(s, "mallory")
      #expect(try s.send(GcsApiTests.media("a.bin", Self.bytes(1000)).with(auth)).status == 200)
      #expect(try Self.retryAfter(s.send(GcsApiTests.media("b.bin", Self.bytes(10)).with(auth))) != nil)
      for (verb, target) in [("copyTo", "c.bin"), ("rewriteTo", "d.bin")] {
        let r = try s.send(
          WireRequest(
            "POST", GcsApiTests.item("a.bin") + "/\(verb)/b/app/o/\(target)",
            headers: [auth, ("Content-Type", "application/json")], body: Array("{}".utf8)))
        #expect(r.status == 200, "\(verb): \(r.status) \(r.text)")
      }
    }
  }

  // MARK: - who is charged, and when it refills

  /// Service accounts (admin identities) are exempt; anonymous callers are charged by address,
  /// apart from users.
  @Test func adminIdentitiesAreExemptAndAnonymousCallersAreChargedByAddress() throws {
    try withService(configure: {
      $0.quota = WriteQuota(bytesPerPeriod: 1000)
      $0.publicURL = ServiceAccountServerTests.publicURL
    }) { s in
      let created = try ServiceAccounts.create(
        name: "backend", publicURL: ServiceAccountServerTests.publicURL, in: s.service.larder)
      let account = ServiceAccountServerTests.Account(
        email: created.record.clientEmail, kid: created.record.keyID,
        key: try PrivateKey(pem: Array(created.keyFile["private_key"]!.utf8)))
      let token = try ServiceAccountServerTests().accessToken(s, account)
      for i in 0..<3 {
        let r = try s.send(
          WireRequest(
            "POST", "/v0/b/app/o?name=admin\(i)", headers: [("Authorization", "Bearer \(token)")],
            body: Self.bytes(600)))
        #expect(r.status == 200, "\(r.text)")
      }
      #expect(try s.send(WireRequest("POST", "/v0/b/app/o?name=anon0", body: Self.bytes(600))).status == 200)
      _ = Self.retryAfter(try s.send(WireRequest("POST", "/v0/b/app/o?name=anon1", body: Self.bytes(600))))
      // A user from the same address has a bucket of its own.
      let user = try s.send(
        WireRequest(
          "POST", "/v0/b/app/o?name=user0", headers: [Self.bearer(s, "alice")], body: Self.bytes(600)))
      #expect(user.status == 200, "\(user.text)")
    }
  }

  /// The bucket refills over the period: refused now, admitted once `Retry-After` has passed.
  @Test func theBucketRefillsOverThePeriod() throws {
    try withService(configure: { $0.quota = WriteQuota(bytesPerPeriod: 1000, period: .milliseconds(300)) }) {
      s in
      let auth = Self.bearer(s, "mallory")
      func upload(_ name: String) throws -> WireResponse {
        try s.send(WireRequest("POST", "/v0/b/app/o?name=\(name)", headers: [auth], body: Self.bytes(1000)))
      }
      let a = try upload("a")
      #expect(a.status == 200)
      let b = try upload("b")
      #expect(Self.retryAfter(b) == 1)
      Thread.sleep(forTimeInterval: 0.35)
      let c = try upload("c")
      #expect(c.status == 200)
    }
  }

  /// A chunked body (no `Content-Length`) is charged as it streams, and refused mid-body once the
  /// bucket is spent: nothing of it is stored.
  @Test func aChunkedBodyIsChargedAsItStreams() throws {
    try withService(configure: { $0.quota = WriteQuota(bytesPerPeriod: 256 << 10) }) { s in
      let content = Self.bytes(1 << 20)
      var head = WireRequest(
        "POST", "/v0/b/app/o?name=chunked",
        headers: [Self.bearer(s, "mallory"), ("Transfer-Encoding", "chunked")])
      head.addLength = false
      let connection = try WireConnection(port: s.port)
      try connection.send(head.head(closing: true))
      for start in stride(from: 0, to: content.count, by: 64 << 10) {
        let piece = Array(content[start..<min(start + (64 << 10), content.count)])
        guard
          (try? connection.send(Array(String(piece.count, radix: 16).utf8) + [13, 10] + piece + [13, 10]))
            != nil
        else { break }
      }
      try? connection.send(Array("0\r\n\r\n".utf8))
      let r = try connection.readResponse(head: false)
      _ = Self.retryAfter(r)
      #expect(try s.send(.get("/v0/b/app/o/chunked")).status == 404)
      #expect(try s.service.larder.statistics().blobBytes == 0)
    }
  }

  /// Anonymous callers are told apart by address; an IPv6 client by its /64.
  @Test func anonymousSubjectsAreAddressesAndIPv6Networks() {
    let subject = { (address: String) in QuotaSubject.of(nil, address: address)?.key }
    #expect(subject("192.0.2.7") == "address:192.0.2.7")
    #expect(subject("::ffff:192.0.2.7") == "address:192.0.2.7")
    #expect(subject("2001:db8:1:2:aaaa::1") == subject("2001:db8:1:2:bbbb::2"))
    #expect(subject("2001:db8:1:2::1") == "address:2001:db8:1:2::/64")
    #expect(subject("2001:db8:1:3::1") != subject("2001:db8:1:2::1"))
    #expect(QuotaSubject.of(Identity(uid: "u1"), address: "192.0.2.7")?.key == "uid:u1")
    #expect(QuotaSubject.of(Identity(uid: "sa", serviceAccount: "sa@x"), address: "192.0.2.7") == nil)
  }

  /// 0 turns each limit off.
  @Test func zeroIsUnlimited() throws {
    try withService(configure: { $0.quota = .unlimited }) { s in
      let auth = Self.bearer(s, "mallory")
      for i in 0..<3 {
        #expect(
          try s.send(WireRequest("POST", "/v0/b/app/o?name=o\(i)", headers: [auth], body: Self.bytes(4096)))
            .status == 200)
      }
      let ledger = s.service.context.quotas
      for i in 0..<5 { _ = try s.create(length: 10, name: "u\(i)", extra: [auth]) }
      #expect(ledger.uploadsInProgress(of: QuotaSubject.of(Identity(uid: "mallory"), address: "")!) == 0)
    }
  }
}

extension WireRequest {
  /// This request with one more header.
  func with(_ header: (String, String)) -> WireRequest {
    var copy = self
    copy.headers.append(header)
    return copy
  }
}

/// The ledger alone: the bucket's arithmetic and the slots of uploads in progress.
@Suite struct QuotaLedgerTests {
  let subject = QuotaSubject.of(Identity(uid: "u1"), address: "")

  /// A write larger than the whole quota is admitted by a full bucket, which it leaves in debt;
  /// a refusal takes nothing; a refund gives back.
  @Test func aFullBucketAdmitsOneLargeWriteThenOwes() throws {
    let ledger = QuotaLedger(WriteQuota(bytesPerPeriod: 1000, period: .seconds(1000)), uploads: nil)
    try ledger.reserve(subject, bytes: 5000)
    #expect(throws: QuotaError.self) { try ledger.reserve(subject, bytes: 1) }
    do {
      try ledger.reserve(subject, bytes: 1)
    } catch {
      // 4,000 bytes of debt, then one, at one byte a second.
      #expect((4000...4001).contains(error.retryAfter), "\(error.retryAfter)")
    }
    ledger.refund(subject, bytes: 4500)
    try ledger.reserve(subject, bytes: 400)
    #expect(throws: QuotaError.self) { try ledger.reserve(subject, bytes: 200) }
    // Admin identities are never refused.
    try ledger.reserve(nil, bytes: 1 << 40)
  }

  /// The limit on uploads in progress holds a slot while a creation runs, gives it back when the
  /// creation fails, and finds a terminated upload gone when it looks again.
  @Test func aFailedCreationGivesItsSlotBackAndATerminatedOneIsFoundGone() throws {
    try withService { s in
      let store = s.service.context.uploads
      let ledger = QuotaLedger(WriteQuota(uploadsInProgress: 2), uploads: store)
      let subject = try #require(subject)
      struct Failed: Error {}
      #expect(throws: Failed.self) { _ = try ledger.opening(subject) { throw Failed() } }
      #expect(ledger.uploadsInProgress(of: subject) == 0)
      let create = { (name: String) in try store.create(bucket: "app", name: name, owner: "u1", length: 1) }
      let first = try ledger.opening(subject) { try create("a") }
      _ = try ledger.opening(subject) { try create("b") }
      #expect(throws: QuotaError.self) { _ = try ledger.opening(subject) { try create("c") } }
      do {
        _ = try ledger.opening(subject) { try create("c") }
      } catch let error as QuotaError {
        #expect(error.code == "too-many-uploads-in-progress")
        #expect((86_000...86_400).contains(error.retryAfter), "\(error.retryAfter)")
      }
      #expect(ledger.uploadsInProgress(of: subject) == 2)
      try store.terminate(id: first.id, owner: "u1")
      Thread.sleep(forTimeInterval: 1.1)
      _ = try ledger.opening(subject) { try create("d") }
      #expect(ledger.uploadsInProgress(of: subject) == 2)
    }
  }
}
