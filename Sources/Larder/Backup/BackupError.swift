/// Why a backup, a restore or work on a backup destination refused or failed; each names what
/// to do. Nothing was changed in the store, and nothing usable-looking was left in the destination.
public enum BackupError: Error, Equatable, CustomStringConvertible {
  /// A part of issue 35 this version does not do (a PostgreSQL catalog, S3).
  case notSupportedYet(String)
  /// The destination holds another store's backups and `--force` was not given.
  case otherStore(destination: String, holds: String, store: String)
  /// No complete snapshot with this id (or none at all when `id` is nil).
  case unknownSnapshot(id: String?, destination: String)
  /// A restore target (data directory, catalog or blob store) that already holds something.
  case notEmpty(directory: String, entry: String)
  /// Another backup or prune holds the destination's lock.
  case busy(lockPath: String)
  /// The destination cannot be made or written.
  case unwritable(path: String, reason: String)
  /// The destination's store cannot be reached, refuses the credentials, or has no such bucket.
  case unreachable(destination: String, reason: String)
  /// A snapshot's catalog or blob is not what its manifest says (restore refuses it).
  case damaged(snapshot: String, what: String)
  /// The pin lapsed while the backup copied (the process stalled past its lease): the
  /// collector may have removed what the snapshot references.
  case pinLapsed(snapshot: String)

  public var description: String {
    switch self {
    case .notSupportedYet(let what): "\(what) is not supported yet"
    case .otherStore(let destination, let holds, let store):
      "\(destination) holds the backups of store \(holds), not of this store (\(store)); "
        + "pass --force to add this store's snapshots beside them"
    case .unknownSnapshot(let id?, let destination):
      "no complete snapshot \(id) in \(destination) (see larder backup list)"
    case .unknownSnapshot(nil, let destination): "no complete snapshot in \(destination)"
    case .notEmpty(let directory, let entry):
      "\(directory) is not empty (it holds \(entry)): restore only into an empty store"
    case .busy(let lockPath): "another backup or prune is running on this destination (\(lockPath) is locked)"
    case .unwritable(let path, let reason): "cannot write the backup destination \(path): \(reason)"
    case .unreachable(let destination, let reason): "cannot use the backup destination \(destination): \(reason)"
    case .damaged(let snapshot, let what): "snapshot \(snapshot) is damaged: \(what)"
    case .pinLapsed(let snapshot):
      "snapshot \(snapshot)'s pin lapsed while copying (the process stalled past its lease); run the backup again"
    }
  }
}
