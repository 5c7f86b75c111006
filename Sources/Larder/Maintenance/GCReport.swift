import Foundation

/// What one garbage collection did, or (dry run) would do. Encodes to JSON for `larder gc --json`.
public struct GCReport: Codable, Sendable, Equatable {
  public var dryRun: Bool
  public var graceSeconds: Double
  /// Resumable uploads past their `expires_at`: rows deleted, partial files removed.
  public var uploadsExpired = 0
  public var uploadBytesFreed: Int64 = 0
  /// `files` rows no object and no attachment referred to, older than the grace period.
  public var filesReleased = 0
  /// Of those, image variants (derived files) released with their source's last file.
  public var variantsReleased = 0
  /// Files nothing refers to that the grace period keeps this time: uploaded less than
  /// `graceSeconds` ago (an app may still attach them). A later collection takes them.
  public var filesHeldByGrace = 0
  /// Their sizes summed (what they take, counting content they share with other files).
  public var bytesHeldByGrace: Int64 = 0
  /// `blobs` rows (and their files) no `files` row referred to.
  public var blobsRemoved = 0
  public var blobBytesFreed: Int64 = 0
  /// Write transactions used for blobs.
  public var batches = 0
  /// Blobs in S3: deletion intents that an earlier (or a concurrent) collection committed and
  /// did not finish, whose objects this run deleted. Their rows were counted in `blobsRemoved`
  /// by the run that deleted them, so they are not again.
  public var deletionsResumed = 0
  /// Files under `blobs/` with no row (leftovers of crashed writes, or misplaced files).
  public var strayFilesRemoved = 0
  public var strayBytesFreed: Int64 = 0
  /// Abandoned temp files (writer gone, older than a minute), and partial-upload files whose
  /// upload row never committed.
  public var tempFilesRemoved = 0
  public var tempBytesFreed: Int64 = 0
  /// Leftovers of an earlier crashed collection found in `trash/` (restored / removed). In a dry
  /// run, `trashRemoved` counts the entries found.
  public var trashRestored = 0
  public var trashRemoved = 0
  /// Sum of all bytes freed.
  public var bytesFreed: Int64 = 0
  public var durationSeconds: Double = 0
  /// Wall time per phase (`trash`, `uploads`, `files`, `blobs`, `strays`, `temp`).
  public var phaseSeconds: [String: Double] = [:]

  public init(dryRun: Bool, graceSeconds: Double) {
    self.dryRun = dryRun
    self.graceSeconds = graceSeconds
  }

  /// True when nothing was (or would be) changed.
  public var changedNothing: Bool {
    uploadsExpired == 0 && filesReleased == 0 && blobsRemoved == 0 && strayFilesRemoved == 0 && deletionsResumed == 0
      && tempFilesRemoved == 0 && trashRestored == 0 && trashRemoved == 0
  }
}

/// Where a collection is, for a progress line on a terminal.
public struct GCProgress: Sendable, Equatable {
  public enum Phase: String, Sendable {
    case trash, uploads, files, blobs, strays, temp, done
  }

  public var phase: Phase
  /// Items handled so far in this phase (blobs removed, directories walked, …).
  public var processed: Int
}
