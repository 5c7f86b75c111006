import Foundation

/// What an observation delivers: the first result, then each change to it.
///
/// An `.update` says how to turn the previous result into `results`, in the order a table view's
/// batch update applies them:
/// 1. remove the elements at `deletions` (indices into the previous array, ascending — remove
///    from the highest down);
/// 2. insert `results[i]` at `i` for each `i` in `insertions` (indices into the new array, ascending);
/// 3. replace the element at each index in `modifications` (indices into the new array) by `results[i]`.
///
/// A model is *kept* when its id is in both arrays and it keeps its order relative to the other
/// kept models (the longest such run is chosen); a kept model whose stored JSON changed is a
/// modification. A model that moved relative to the others is a deletion plus an insertion.
/// ``applied(to:)`` performs exactly these steps.
public enum ModelChange<T: Model>: Sendable {
  case initial([T])
  case update(results: [T], deletions: [Int], insertions: [Int], modifications: [Int])

  /// The full result after this change.
  public var results: [T] {
    switch self {
    case .initial(let results), .update(let results, _, _, _): results
    }
  }

  /// The previous result with this change applied (for `.initial`, the initial result).
  public func applied(to previous: [T]) -> [T] {
    switch self {
    case .initial(let results): return results
    case .update(let results, let deletions, let insertions, let modifications):
      var array = previous
      for index in deletions.reversed() { array.remove(at: index) }
      for index in insertions { array.insert(results[index], at: index) }
      for index in modifications { array[index] = results[index] }
      return array
    }
  }
}

/// Index sets that turn one result into the next (see ``ModelChange``).
struct ResultDiff: Equatable {
  var deletions: [Int] = []
  var insertions: [Int] = []
  var modifications: [Int] = []

  var isEmpty: Bool { deletions.isEmpty && insertions.isEmpty && modifications.isEmpty }

  /// Diffs two results by id; ids are unique within a result. O(n log n).
  static func between(old: [(id: String, body: String)], new: [(id: String, body: String)]) -> ResultDiff {
    var oldIndex: [String: Int] = [:]
    oldIndex.reserveCapacity(old.count)
    for (i, row) in old.enumerated() { oldIndex[row.id] = i }

    // Models present in both, in new order, with their old position; the longest increasing
    // run of old positions is the largest set that kept its relative order.
    var common: [(new: Int, old: Int)] = []
    for (j, row) in new.enumerated() {
      if let i = oldIndex[row.id] { common.append((j, i)) }
    }
    let keptCommon = longestIncreasingRun(common.map(\.old))
    var keptNew = [Bool](repeating: false, count: new.count)
    var keptOld = [Bool](repeating: false, count: old.count)
    for k in keptCommon {
      keptNew[common[k].new] = true
      keptOld[common[k].old] = true
    }

    var diff = ResultDiff()
    for i in old.indices where !keptOld[i] { diff.deletions.append(i) }
    for j in new.indices {
      if !keptNew[j] {
        diff.insertions.append(j)
      } else if old[oldIndex[new[j].id]!].body != new[j].body {
        diff.modifications.append(j)
      }
    }
    return diff
  }

  /// Positions in `values` of one longest strictly increasing subsequence (patience sorting).
  static func longestIncreasingRun(_ values: [Int]) -> [Int] {
    var tails: [Int] = []  // positions in `values` ending the best run of each length
    var previous = [Int](repeating: -1, count: values.count)
    for (i, v) in values.enumerated() {
      var lo = 0
      var hi = tails.count
      while lo < hi {
        let mid = (lo + hi) / 2
        if values[tails[mid]] < v { lo = mid + 1 } else { hi = mid }
      }
      if lo > 0 { previous[i] = tails[lo - 1] }
      if lo == tails.count { tails.append(i) } else { tails[lo] = i }
    }
    var run: [Int] = []
    var k = tails.last ?? -1
    while k >= 0 {
      run.append(k)
      k = previous[k]
    }
    return run.reversed()
  }
}
