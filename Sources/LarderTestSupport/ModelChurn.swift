import Larder

/// Test only: random model commits with references, for the observation stress test and the
/// second process it starts (`larder-model-probe churn`).
public struct ChurnKeeper: Model, Equatable {
  public var id: String
  public var n: Int
}

public struct ChurnTally: Model, Equatable {
  public var id: String
  public var keeperID: String?
  public var backupID: String?
  public var n: Int
  public static let references = [
    ModelReference("keeperID", to: ChurnKeeper.self, onDelete: .cascade),
    ModelReference("backupID", to: ChurnKeeper.self, onDelete: .nullify),
  ]
}

/// Seeded commits over 5 keepers and 30 tallies: saves, deletes that cascade or null, and
/// links. A reference to a keeper another writer has just deleted is refused and rolls back;
/// that is part of the load, not a failure.
public struct ModelChurn {
  private var state: UInt64
  public private(set) var refused = 0

  public init(seed: UInt64) { state = seed }

  private mutating func next(_ bound: UInt64) -> UInt64 {  // SplitMix64
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return (z ^ (z >> 31)) % bound
  }

  public static let follows = ModelRelation<ChurnTally, ChurnKeeper>("follows")

  /// One commit.
  public mutating func step(_ larder: Larder) throws {
    let keeper = "k\(next(5))"
    let other = "k\(next(5))"
    let tally = "t\(next(30))"
    let n = Int(next(100))
    let action = next(8)
    do {
      try larder.write { tx in
        switch action {
        case 0: try tx.save(ChurnKeeper(id: keeper, n: n))
        case 1: try tx.delete(ChurnKeeper.self, id: keeper)
        case 2: try tx.delete(ChurnTally.self, id: tally)
        case 3: try tx.link(Self.follows, from: tally, to: keeper)
        case 4: try tx.unlink(Self.follows, from: tally, to: keeper)
        default:
          if try tx.find(ChurnKeeper.self, id: keeper) == nil { try tx.save(ChurnKeeper(id: keeper, n: n)) }
          let backup = try tx.find(ChurnKeeper.self, id: other) == nil ? nil : other
          try tx.save(ChurnTally(id: tally, keeperID: keeper, backupID: backup, n: n))
        }
      }
    } catch is ModelError {
      refused += 1
    }
  }
}
