import Foundation

/// What `verify` found. Encodes to JSON for `larder verify --json`.
///
/// A finding is either a fault (data lost, corrupt or unreachable, or an invariant broken) or a
/// reclaimable leftover: a file that a write linked or staged and never committed because the
/// process died (a crash, a kill, a power cut). Nothing refers to a leftover, so no data is
/// lost; it only takes space until `larder gc` removes it. Leftovers are expected after any
/// crash, so they do not make the report unclean.
public struct VerifyReport: Codable, Sendable, Equatable {
  /// One broken invariant.
  public struct Finding: Codable, Sendable, Equatable {
    public enum Kind: String, Codable, Sendable, CaseIterable {
      /// A `blobs` row whose file is missing (I1), and no quarantine explains it.
      case missingBlobFile = "missing-blob-file"
      /// The blob file's size differs from its row.
      case sizeMismatch = "size-mismatch"
      /// The blob file's SHA-256 is not its name.
      case hashMismatch = "hash-mismatch"
      /// Something other than a regular file sits at a blob's address (a symlink, a directory).
      case notRegularFile = "not-regular-file"
      /// A blob file is writable or otherwise not mode 0444.
      case badPermissions = "bad-permissions"
      /// A file under `blobs/` that no row names, or that is not at its address.
      case strayBlobFile = "stray-blob-file"
      /// The blob's recorded MD5 (`md5Hash`) is not its content's; repair clears it, and the
      /// MD5 is computed afresh (``MD5Backfill``). A blob whose MD5 is not known yet is not checked.
      case md5Mismatch = "md5-mismatch"
      /// A `files` row whose size differs from its blob's.
      case fileSizeMismatch = "file-size-mismatch"
      /// A row of `PRAGMA foreign_key_check` (I2).
      case foreignKey = "foreign-key"
      /// A line of `PRAGMA integrity_check` other than `ok`.
      case integrity = "integrity"
      /// A temp file whose writer is gone.
      case abandonedTemp = "abandoned-temp"
      /// An entry left in `trash/` by a crashed collection.
      case leftoverTrash = "leftover-trash"
    }

    public var kind: Kind
    /// Lower-case hex digest, when the finding is about a blob.
    public var sha256: String?
    /// The filesystem path, when the finding is about a file.
    public var path: String?
    public var detail: String
    /// True when `--repair` fixed it.
    public var repaired: Bool
    /// True for a leftover of a write that never committed (a blob file at its address that no
    /// row names, a temp file whose writer is gone): no data is lost and `larder gc` removes it.
    public var reclaimable: Bool

    public init(
      kind: Kind, sha256: String? = nil, path: String? = nil, detail: String, repaired: Bool = false,
      reclaimable: Bool = false
    ) {
      self.kind = kind
      self.sha256 = sha256
      self.path = path
      self.detail = detail
      self.repaired = repaired
      self.reclaimable = reclaimable
    }

    /// How `larder verify` labels the finding: `repaired`, `reclaimable` or `FAULT`.
    public var label: String { repaired ? "repaired" : reclaimable ? "reclaimable" : "FAULT" }
  }

  /// An object whose content is damaged: corrupt or lost, quarantined or not yet.
  public struct DamagedObject: Codable, Sendable, Equatable {
    public var bucket: String
    public var name: String
    /// The content's lower-case hex SHA-256.
    public var sha256: String
    /// Whether its content is quarantined (downloads answer ``LarderError/corruptContent(sha256:)``);
    /// false when this run found it damaged without repairing.
    public var quarantined: Bool
  }

  public var repair: Bool
  public var blobsChecked = 0
  public var bytesHashed: Int64 = 0
  /// Blobs known to be corrupt or lost whose files are marked quarantined: downloads answer
  /// ``LarderError/corruptContent(sha256:)``. Reported, but not a fault of the store's invariants.
  public var quarantinedBlobs = 0
  /// Of those, the blobs this run quarantined (`--repair`).
  public var quarantinedNow = 0
  /// Objects whose content is damaged, by bucket and name: at most ``maxFindings``;
  /// ``damagedObjectCount`` counts them all. Uploading an object's original bytes again heals it.
  public var damagedObjects: [DamagedObject] = []
  public var damagedObjectCount = 0
  /// Contents (hex SHA-256) this run found corrupt or lost and did not quarantine (no
  /// `--repair`, or a repair that could not): their objects are among ``damagedObjects``.
  public var damagedContent: [String] = []
  /// Findings, at most ``maxFindings`` of them; ``findingCount`` counts them all.
  public var findings: [Finding] = []
  public var findingCount = 0
  /// Faults not repaired (all of them without `repair`); reclaimable leftovers are not counted.
  public var unrepairedCount = 0
  /// Reclaimable leftovers not repaired: space `larder gc` frees, not a fault.
  public var reclaimableCount = 0
  public var durationSeconds: Double = 0

  public static let maxFindings = 10_000

  public init(repair: Bool) { self.repair = repair }

  /// True when no invariant is broken, or every broken one was repaired. Reclaimable leftovers
  /// of interrupted writes do not count: they are expected after a crash.
  public var isClean: Bool { unrepairedCount == 0 }

  /// The line that tells a person what to do about reclaimable leftovers; nil when there are none.
  public var reclaimableSummary: String? {
    guard reclaimableCount > 0 else { return nil }
    let what = reclaimableCount == 1 ? "1 file left" : "\(reclaimableCount) files left"
    return "\(what) by writes that never committed (reclaimable, no data lost): larder gc removes them"
  }

  /// Findings per kind, for a summary line.
  public var counts: [Finding.Kind: Int] {
    findings.reduce(into: [:]) { $0[$1.kind, default: 0] += 1 }
  }

  mutating func add(_ finding: Finding) {
    findingCount += 1
    if !finding.repaired {
      if finding.reclaimable { reclaimableCount += 1 } else { unrepairedCount += 1 }
    }
    if findings.count < Self.maxFindings { findings.append(finding) }
  }
}

/// Where a verification is, for a progress line.
public struct VerifyProgress: Sendable, Equatable {
  public var blobsChecked: Int
  public var blobsTotal: Int
  public var bytesHashed: Int64
  public var bytesTotal: Int64
}
