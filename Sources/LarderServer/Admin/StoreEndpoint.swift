import Foundation
import Larder
import LarderAuth
import LarderHTTP

/// `GET /admin/v1/store`: what the store holds, for the console's Store view and for operators.
///
/// Admin identities only (a service account's access token, as everywhere a caller bypasses the
/// rules): no token is a 401, any other identity a 403. The counts come from one catalog snapshot
/// (``Larder/statistics()``); each scans its table, so this is for a person or a scrape every few
/// seconds, not for every request.
///
///     curl -H "Authorization: Bearer $SERVICE_ACCOUNT_ACCESS_TOKEN" http://127.0.0.1:8080/admin/v1/store
struct StoreEndpoint {
  let context: ServiceContext

  /// The answer's JSON (sizes are numbers: the console and scripts do arithmetic on them).
  struct Answer: Encodable {
    struct Collectable: Encodable {
      var blobs: Int
      var bytes: Int64
    }
    struct Uploads: Encodable {
      var count: Int
      var bytes: Int64
    }
    struct LastGC: Encodable {
      var finishedAt: String
      var blobsRemoved: Int
      var bytesFreed: Int64
    }
    var objects: Int
    var buckets: [StoreStatistics.Bucket]
    var files: Int
    var blobs: Int
    /// Sum of the objects' sizes.
    var logicalBytes: Int64
    /// Bytes of distinct content (the blobs).
    var storedBytes: Int64
    /// What deduplication saves: logical minus stored, never below zero.
    var dedupSavedBytes: Int64
    var collectable: Collectable
    var uploadsInProgress: Uploads
    var lastGC: LastGC?
    /// Per webhook subscription: its backlog, as `/metrics` gives it (`larder_event_*`).
    var eventSubscriptions: [EventSubscriptionFigures] = []
    var metrics = "/metrics"

    init(_ s: StoreStatistics) {
      objects = s.objectCount
      buckets = s.buckets
      files = s.fileCount
      blobs = s.blobCount
      logicalBytes = s.logicalBytes
      storedBytes = s.blobBytes
      dedupSavedBytes = max(0, s.logicalBytes - s.blobBytes)
      collectable = Collectable(blobs: s.collectableBlobCount, bytes: s.collectableBlobBytes)
      uploadsInProgress = Uploads(count: s.uploadsInProgress, bytes: s.uploadBytesReceived)
      lastGC = s.lastCollection.map {
        LastGC(
          finishedAt: $0.finishedAt.formatted(.iso8601), blobsRemoved: $0.blobsRemoved,
          bytesFreed: $0.bytesFreed)
      }
    }
  }

  /// One subscription's delivery backlog: what waits, for how long, and what was given up.
  struct EventSubscriptionFigures: Encodable {
    var id: String
    var url: String
    var bucket: String
    var pending: Int
    /// Age of the oldest pending event (0: none pending).
    var lagSeconds: Double
    var dead: Int
  }

  /// The subscriptions with their backlog: two reads over the deliveries' state index, counts
  /// grouped by subscription, never the events themselves.
  static func eventFigures(_ events: ObjectEvents, now: Date = Date()) throws -> [EventSubscriptionFigures] {
    let backlog = Dictionary(uniqueKeysWithValues: try events.backlog().map { ($0.subscriptionID, $0) })
    return try events.subscriptions().map { s in
      let b = backlog[s.id]
      return EventSubscriptionFigures(
        id: s.id, url: s.url, bucket: s.bucket, pending: b?.pending ?? 0,
        lagSeconds: b?.lagSeconds(at: now) ?? 0, dead: b?.dead ?? 0)
    }
  }

  func register(in router: inout Router) {
    router.add("GET", "/admin/v1/store", route: "admin.store") { request, _ in
      guard let identity = try context.identity(request) else { throw AuthError.missingToken }
      guard identity.isAdmin else {
        throw AccessError.denied(
          reason: "the store's counts are for admin identities (service accounts with full_control) only")
      }
      var answer = Answer(try context.larder.statistics())
      answer.eventSubscriptions = try Self.eventFigures(context.larder.events)
      var response = HTTPResponse.json(answer)
      response.headers.set("Cache-Control", "no-store")
      return .respond(response)
    }
  }
}
