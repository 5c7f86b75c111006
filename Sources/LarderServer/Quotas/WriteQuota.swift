/// The per-identity write limits of a service (`larder serve --write-quota`,
/// `--write-quota-period`, `--uploads-in-progress`); 0 turns a limit off.
///
/// ```swift
/// var options = LarderService.Options(dataDirectory: dir, policy: .allowAll)
/// options.quota = WriteQuota(bytesPerPeriod: 1 << 30, period: .seconds(600), uploadsInProgress: 20)
/// ```
/// An identity is a user's `uid`, a service account that is not an admin identity, or, for an
/// anonymous caller, its client address (an IPv6 address by its /64). Admin identities are exempt.
/// ``QuotaLedger`` enforces them, on one node: with several nodes behind a balancer, an identity
/// may write up to the limits on each.
public struct WriteQuota: Sendable, Equatable {
  /// Bytes an identity may write per ``period``: a token bucket that holds this many and refills
  /// continuously at this many per period. 0: unlimited.
  public var bytesPerPeriod: Int64
  public var period: Duration
  /// Resumable uploads (tus, Firebase and GCS sessions) an identity may have in progress at once. 0: unlimited.
  public var uploadsInProgress: Int

  /// The defaults: 10 GiB per hour (twice the default largest upload, so two of those fit
  /// one hour) and 1,000 uploads in progress (a browser uploading a folder of photos through
  /// the Firebase SDK opens a session per file at once).
  public init(
    bytesPerPeriod: Int64 = 10 << 30, period: Duration = .seconds(3600), uploadsInProgress: Int = 1000
  ) {
    self.bytesPerPeriod = bytesPerPeriod
    self.period = period
    self.uploadsInProgress = uploadsInProgress
  }

  /// No limits at all.
  public static let unlimited = WriteQuota(bytesPerPeriod: 0, uploadsInProgress: 0)
}
