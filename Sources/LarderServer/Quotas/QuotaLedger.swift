import Foundation
import Larder
import LarderHTTP
import Synchronization

/// Who a write is charged to: a user's uid, a service account that is not an admin identity, or
/// an anonymous caller's address (IPv6 by its /64, which one client usually holds whole).
public struct QuotaSubject: Hashable, Sendable, CustomStringConvertible {
  public let key: String
  public var description: String { key }

  /// nil for an admin identity (a service account whose token has the full-control scope:
  /// quotas do not apply to it); a read-write service account is charged like a user.
  public static func of(_ identity: Identity?, address: String) -> QuotaSubject? {
    if let identity {
      if identity.isAdmin { return nil }
      if let account = identity.serviceAccount { return QuotaSubject(key: "account:\(account)") }
      return QuotaSubject(key: "uid:" + identity.uid)
    }
    return QuotaSubject(key: "address:" + network(of: address))
  }

  /// An IPv4 address as it is (an IPv4-mapped IPv6 one as IPv4), an IPv6 one as its /64.
  static func network(of address: String) -> String {
    guard address.contains(":") else { return address }
    var bytes = in6_addr()
    guard inet_pton(AF_INET6, address, &bytes) == 1 else { return address }
    let octets = withUnsafeBytes(of: &bytes) { Array($0) }
    if octets[0..<10].allSatisfy({ $0 == 0 }) && octets[10] == 0xFF && octets[11] == 0xFF {
      return octets[12...].map(String.init).joined(separator: ".")
    }
    let groups = stride(from: 0, to: 8, by: 2).map {
      String(UInt16(octets[$0]) << 8 | UInt16(octets[$0 + 1]), radix: 16)
    }
    return groups.joined(separator: ":") + "::/64"
  }
}

/// The one place write quotas are kept and enforced: bytes written per period, and resumable
/// uploads in progress, per ``QuotaSubject``, on this node (see ``WriteQuota``).
///
/// ```swift
/// let ledger = QuotaLedger(WriteQuota(bytesPerPeriod: 1 << 30), uploads: store)
/// try ledger.reserve(subject, bytes: 4096)        // QuotaError.bytes when the bucket lacks them
/// ledger.refund(subject, bytes: 1000)             // what was reserved and never came
/// let upload = try ledger.opening(subject) { try store.create(…) }
/// ```
///
/// Bytes: a token bucket per subject holding up to ``WriteQuota/bytesPerPeriod``, refilled
/// continuously. A write of `n` bytes is admitted when the bucket holds `n`, or is full: one write
/// larger than the whole quota (up to the maximum upload size) is possible once the bucket is full,
/// and leaves it in debt, so over any time `t` a subject writes at most the quota, plus `t` times
/// the rate, plus one maximum upload. A bucket that is full again carries no state and is dropped.
///
/// Uploads in progress: the ids of the uploads this node saw a subject create, with their
/// expiries. At the limit, they are asked of the catalog (primary-key lookups, at most once a
/// second per subject), so a finish on another node, a termination or `larder gc` frees a slot.
/// Kept in memory rather than counted from the catalog's `uploads.owner`: that column has no
/// index (a count would scan every upload of the last day on each creation) and does not tell
/// anonymous callers apart. So the limit is per node, and starts afresh on a restart.
public final class QuotaLedger: Sendable {
  public let quota: WriteQuota
  private let uploads: UploadStore?

  struct Bucket {
    var tokens: Double
    var at: ContinuousClock.Instant
  }

  struct InProgress {
    /// Upload id → when it expires.
    var ids: [String: Date] = [:]
    /// Creations admitted and not finished yet.
    var pending = 0
    var checked: ContinuousClock.Instant?
    var count: Int { ids.count + pending }
  }

  struct State {
    var buckets: [QuotaSubject: Bucket] = [:]
    var inProgress: [QuotaSubject: InProgress] = [:]
  }

  private let state = Mutex(State())
  private let refusedBytes = Atomic<UInt64>(0)
  private let refusedUploads = Atomic<UInt64>(0)
  private let admittedBytes = Atomic<UInt64>(0)

  /// Subjects tracked before full buckets are swept out.
  static let sweepAbove = 10_000
  /// How often, at most, a subject at its limit of uploads has them looked up again.
  static let recheckInterval: Duration = .seconds(1)

  /// `uploads` is where uploads in progress are looked up again (nil: never; only tests).
  public init(_ quota: WriteQuota, uploads: UploadStore?) {
    self.quota = quota
    self.uploads = uploads
  }

  private var capacity: Double { Double(quota.bytesPerPeriod) }
  /// Bytes per second.
  private var rate: Double {
    capacity / max(quota.period.timeInterval, 1e-3)
  }

  // MARK: - bytes

  /// Takes `bytes` from `subject`'s bucket, or refuses. nil (an admin identity) is never refused.
  /// - Throws: ``QuotaError/bytes(limit:period:retryAfter:)``, with the bucket untouched.
  public func reserve(_ subject: QuotaSubject?, bytes: Int64) throws(QuotaError) {
    guard let subject, bytes > 0 else { return }
    guard quota.bytesPerPeriod > 0 else { return }
    let need = min(Double(bytes), capacity)
    let shortfall: Double? = state.withLock { s in
      sweep(&s)
      var bucket = refilled(s.buckets[subject])
      defer { s.buckets[subject] = bucket }
      guard bucket.tokens >= need else { return need - bucket.tokens }
      bucket.tokens -= Double(bytes)
      return nil
    }
    guard let shortfall else { return }
    refusedBytes.add(1, ordering: .relaxed)
    throw .bytes(
      limit: quota.bytesPerPeriod, period: quota.period,
      retryAfter: max(1, Int((shortfall / rate).rounded(.up))))
  }

  /// Refuses `subject` while its bucket is empty or in debt: the check before a write whose size
  /// only the write tells (then ``charge(_:bytes:)``).
  /// - Throws: ``QuotaError/bytes(limit:period:retryAfter:)``.
  public func requireCredit(_ subject: QuotaSubject?) throws(QuotaError) {
    try reserve(subject, bytes: 1)
    refund(subject, bytes: 1)
  }

  /// Takes `bytes` already written (a variant just rendered) from `subject`'s bucket, into debt if
  /// need be: the next write waits until it is repaid.
  public func charge(_ subject: QuotaSubject?, bytes: Int64) {
    guard let subject, bytes > 0 else { return }
    admitted(bytes)
    guard quota.bytesPerPeriod > 0 else { return }
    state.withLock { s in
      var bucket = refilled(s.buckets[subject])
      bucket.tokens -= Double(bytes)
      s.buckets[subject] = bucket
    }
  }

  /// Gives back what ``reserve(_:bytes:)`` took and was not written (a body shorter than declared, or broken off).
  public func refund(_ subject: QuotaSubject?, bytes: Int64) {
    guard let subject, bytes > 0, quota.bytesPerPeriod > 0 else { return }
    state.withLock { s in
      guard var bucket = s.buckets[subject] else { return }
      bucket = refilled(bucket)
      bucket.tokens = min(capacity, bucket.tokens + Double(bytes))
      s.buckets[subject] = bucket
    }
  }

  /// Counts `bytes` written by a subject (``larder_quota_admitted_bytes_total``).
  func admitted(_ bytes: Int64) {
    if bytes > 0 { admittedBytes.add(UInt64(bytes), ordering: .relaxed) }
  }

  /// `bucket` brought up to now (a new one is full); full ones are swept when there are many.
  private func refilled(_ bucket: Bucket?) -> Bucket {
    let now = ContinuousClock.now
    guard var bucket else { return Bucket(tokens: capacity, at: now) }
    bucket.tokens = min(capacity, bucket.tokens + (now - bucket.at).timeInterval * rate)
    bucket.at = now
    return bucket
  }

  /// Drops the buckets that are full again (they carry nothing) once there are many: addresses
  /// come from clients, and must not grow the table for ever.
  private func sweep(_ s: inout State) {
    if s.buckets.count > Self.sweepAbove {
      s.buckets = s.buckets.filter { refilled($0.value).tokens < capacity }
    }
    if s.inProgress.count > Self.sweepAbove {
      let now = Date()
      for (subject, entry) in s.inProgress {
        let live = entry.ids.filter { $0.value >= now }
        s.inProgress[subject] =
          live.isEmpty && entry.pending == 0
          ? nil : InProgress(ids: live, pending: entry.pending, checked: entry.checked)
      }
    }
  }

  // MARK: - uploads in progress

  /// Runs `create` (which records a resumable upload) if `subject` has fewer uploads in progress
  /// than the limit, and counts the upload it returns.
  /// - Throws: ``QuotaError/uploadsInProgress(limit:retryAfter:)`` without calling `create`;
  ///   what `create` throws.
  public func opening(_ subject: QuotaSubject?, _ create: () throws -> Upload) throws -> Upload {
    guard let subject, quota.uploadsInProgress > 0 else { return try create() }
    try admitUpload(subject)
    do {
      let upload = try create()
      state.withLock { s in
        s.inProgress[subject, default: InProgress()].pending -= 1
        s.inProgress[subject, default: InProgress()].ids[upload.id] = upload.expiresAt
      }
      return upload
    } catch {
      state.withLock { s in s.inProgress[subject, default: InProgress()].pending -= 1 }
      throw error
    }
  }

  /// Holds a slot for a creation, looking the subject's uploads up again once if it is at the limit.
  private func admitUpload(_ subject: QuotaSubject) throws(QuotaError) {
    enum Outcome {
      case admitted
      case recheck([String])
      case refused(retryAfter: Int)
    }
    func attempt(mayRecheck: Bool) -> Outcome {
      state.withLock { s in
        sweep(&s)
        var entry = s.inProgress[subject] ?? InProgress()
        defer { s.inProgress[subject] = entry.count == 0 ? nil : entry }
        let now = Date()
        entry.ids = entry.ids.filter { $0.value >= now }
        if entry.count < quota.uploadsInProgress {
          entry.pending += 1
          return .admitted
        }
        let due = entry.checked.map { ContinuousClock.now - $0 >= Self.recheckInterval } ?? true
        if mayRecheck, due, uploads != nil {
          entry.checked = .now
          return .recheck(Array(entry.ids.keys))
        }
        let first = entry.ids.values.min().map { $0.timeIntervalSince(now) } ?? 1
        return .refused(retryAfter: max(1, Int(first.rounded(.up))))
      }
    }
    var outcome = attempt(mayRecheck: true)
    if case .recheck(let ids) = outcome, let uploads {
      // Outside the lock: a catalog read. A failed one keeps every id (the limit holds).
      if let open = try? uploads.inProgress(among: ids) {
        let gone = Set(ids).subtracting(open)
        state.withLock { s in
          for id in gone { s.inProgress[subject]?.ids[id] = nil }
        }
      }
      outcome = attempt(mayRecheck: false)
    }
    switch outcome {
    case .admitted: return
    case .recheck: throw .uploadsInProgress(limit: quota.uploadsInProgress, retryAfter: 1)
    case .refused(let seconds):
      refusedUploads.add(1, ordering: .relaxed)
      throw .uploadsInProgress(limit: quota.uploadsInProgress, retryAfter: seconds)
    }
  }

  /// The uploads in progress counted for `subject` now (for tests).
  public func uploadsInProgress(of subject: QuotaSubject) -> Int {
    state.withLock { $0.inProgress[subject]?.count ?? 0 }
  }

  // MARK: - metrics

  /// `larder_quota_refusals_total{kind="bytes"|"uploads"}` and `larder_quota_admitted_bytes_total`:
  /// labels are fixed, never an identity.
  public func register(in metrics: Metrics) {
    metrics.registerFamily(
      "larder_quota_refusals_total",
      help: "Writes refused by a write quota, by kind (bytes per period, uploads in progress).",
      type: "counter", label: "kind"
    ) { [self] in
      [
        ("bytes", Double(refusedBytes.load(ordering: .relaxed))),
        ("uploads", Double(refusedUploads.load(ordering: .relaxed))),
      ]
    }
    metrics.registerFamily(
      "larder_quota_admitted_bytes_total",
      help: "Bytes written by identities subject to write quotas (all but admin identities).",
      type: "counter", label: nil
    ) { [self] in [("", Double(admittedBytes.load(ordering: .relaxed)))] }
  }
}
