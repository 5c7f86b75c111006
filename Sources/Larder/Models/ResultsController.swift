import Foundation
import Synchronization

/// A live, sectioned query result in the shape of `NSFetchedResultsController` /
/// FirebaseResultsController: after each commit that changes it, the new sections and a change
/// set a table or collection view applies in one batch update.
///
/// ```swift
/// let controller = try ModelResultsController(
///   larder.models, query: Query(Task.self).sorted(by: "list").sorted(by: "title"),
///   sectionBy: { $0.list }
/// ) { change in
///   DispatchQueue.main.async {
///     guard case .update(let sections, let changes) = change else { return table.reloadData() }
///     table.performBatchUpdates {
///       table.deleteSections(IndexSet(changes.sectionDeletions), with: .fade)
///       table.insertSections(IndexSet(changes.sectionInsertions), with: .fade)
///       table.deleteRows(at: changes.rowDeletions.map { IndexPath(row: $0.row, section: $0.section) }, with: .fade)
///       table.insertRows(at: changes.rowInsertions.map { … }, with: .fade)
///       for move in changes.rowMoves { table.moveRow(at: …move.from, to: …move.to) }
///       table.reloadRows(at: changes.rowUpdates.map { … }, with: .none)
///     }
///   }
/// }
/// ```
/// Sections follow the order in which their keys first appear in the results: sort the query by
/// the section field first so that each section is one run.
public final class ModelResultsController<T: Model>: Sendable {
  /// The sections last delivered, shared with the observation's handler.
  private final class Current: Sendable {
    let sections = Mutex<[ResultsSection<T>]>([])
  }

  private let current = Current()
  private let token: ObservationToken

  /// Starts observing `query`; `onChange` gets `.initial` and then every non-empty update, in
  /// commit order, on the observation's own queue.
  /// - Throws: ``ModelError`` if the query is invalid.
  public init(
    _ store: ModelStore, query: Query<T>, sectionBy key: @escaping @Sendable (T) -> String,
    onChange: @escaping @Sendable (ResultsChange<T>) -> Void
  ) throws {
    let current = self.current
    token = try store.observe(query) { change in
      let sections = ResultsSection.group(change.results, by: key)
      let previous = current.sections.withLock { state in
        defer { state = sections }
        return state
      }
      switch change {
      case .initial: onChange(.initial(sections))
      case .update:
        let changes = ResultsChangeSet.between(old: previous, new: sections)
        if !changes.isEmpty { onChange(.update(sections, changes)) }
      }
    }
  }

  /// The sections as last delivered.
  public var sections: [ResultsSection<T>] { current.sections.withLock { $0 } }

  /// Stops delivery (also when the controller is released).
  public func cancel() { token.cancel() }
}

/// The models of one section, in the query's order.
public struct ResultsSection<T: Model>: Sendable {
  public let key: String
  public var models: [T]

  public init(key: String, models: [T]) {
    self.key = key
    self.models = models
  }

  /// Groups results by key, sections in order of first appearance, rows in result order.
  public static func group(_ results: [T], by key: (T) -> String) -> [ResultsSection<T>] {
    var sections: [ResultsSection<T>] = []
    var index: [String: Int] = [:]
    for model in results {
      let k = key(model)
      if let i = index[k] {
        sections[i].models.append(model)
      } else {
        index[k] = sections.count
        sections.append(ResultsSection(key: k, models: [model]))
      }
    }
    return sections
  }
}

/// A row's place: section and row index.
public struct ResultsIndexPath: Sendable, Hashable, Comparable, CustomStringConvertible {
  public let section: Int
  public let row: Int

  public init(section: Int, row: Int) {
    self.section = section
    self.row = row
  }

  public static func < (a: Self, b: Self) -> Bool { (a.section, a.row) < (b.section, b.row) }
  public var description: String { "[\(section), \(row)]" }
}

/// How one sectioned result becomes the next, with a table view's batch-update meaning:
/// deletions, moves' sources and updates are paths in the old sections; insertions and moves'
/// destinations are paths in the new ones.
///
/// A section whose key is in both results and that kept its order relative to the other such
/// sections (the longest such run) stays; every other old section is deleted with its rows and
/// every other new section is inserted with its rows (neither lists its rows). Among staying
/// sections, a row kept in its section and in order relative to the others kept there (the
/// longest run) stays and is listed in `rowUpdates` if its stored JSON changed; any other row
/// present in both is a move (it takes its new content); rows that appear or disappear in a
/// staying section are insertions and deletions. ``ResultsChange/applied(to:)`` performs it.
public struct ResultsChangeSet: Sendable, Hashable {
  public struct Move: Sendable, Hashable {
    public let from: ResultsIndexPath
    public let to: ResultsIndexPath
  }

  /// Old section indices, ascending.
  public var sectionDeletions: [Int] = []
  /// New section indices, ascending.
  public var sectionInsertions: [Int] = []
  /// Old paths, ascending.
  public var rowDeletions: [ResultsIndexPath] = []
  /// New paths, ascending.
  public var rowInsertions: [ResultsIndexPath] = []
  public var rowMoves: [Move] = []
  /// Old paths of rows that stayed in place and changed, ascending.
  public var rowUpdates: [ResultsIndexPath] = []

  public var isEmpty: Bool {
    sectionDeletions.isEmpty && sectionInsertions.isEmpty && rowDeletions.isEmpty && rowInsertions.isEmpty
      && rowMoves.isEmpty && rowUpdates.isEmpty
  }

  /// The change from `old` to `new`; a row changed when its encoded JSON differs.
  public static func between<T: Model>(old: [ResultsSection<T>], new: [ResultsSection<T>]) -> ResultsChangeSet
  {
    var changes = ResultsChangeSet()
    var oldSection: [String: Int] = [:]
    for (i, section) in old.enumerated() { oldSection[section.key] = i }
    let common = new.indices.compactMap { j in oldSection[new[j].key].map { (new: j, old: $0) } }
    var staysOld = [Bool](repeating: false, count: old.count)
    var staysNew = [Bool](repeating: false, count: new.count)
    for k in ResultDiff.longestIncreasingRun(common.map(\.old)) {
      staysOld[common[k].old] = true
      staysNew[common[k].new] = true
    }
    changes.sectionDeletions = old.indices.filter { !staysOld[$0] }
    changes.sectionInsertions = new.indices.filter { !staysNew[$0] }

    // Rows of staying sections only: the others go and come with their sections.
    func paths(_ sections: [ResultsSection<T>], _ stays: [Bool]) -> [String: ResultsIndexPath] {
      var paths: [String: ResultsIndexPath] = [:]
      for (s, section) in sections.enumerated() where stays[s] {
        for (r, model) in section.models.enumerated() {
          paths[model.id] = ResultsIndexPath(section: s, row: r)
        }
      }
      return paths
    }
    let oldPaths = paths(old, staysOld)
    let newPaths = paths(new, staysNew)
    var kept: Set<String> = []
    for (j, section) in new.enumerated() where staysNew[j] {
      let i = oldSection[section.key]!
      let sameSection = section.models.compactMap { model in
        oldPaths[model.id].flatMap { $0.section == i ? (id: model.id, oldRow: $0.row) : nil }
      }
      for k in ResultDiff.longestIncreasingRun(sameSection.map(\.oldRow)) { kept.insert(sameSection[k].id) }
    }
    for (id, from) in oldPaths {
      guard let to = newPaths[id] else {
        changes.rowDeletions.append(from)
        continue
      }
      if !kept.contains(id) {
        changes.rowMoves.append(Move(from: from, to: to))
      } else if !sameContent(old[from.section].models[from.row], new[to.section].models[to.row]) {
        changes.rowUpdates.append(from)
      }
    }
    for (id, to) in newPaths where oldPaths[id] == nil { changes.rowInsertions.append(to) }
    changes.rowDeletions.sort()
    changes.rowInsertions.sort()
    changes.rowUpdates.sort()
    changes.rowMoves.sort { $0.from < $1.from }
    return changes
  }

  private static func sameContent<T: Model>(_ a: T, _ b: T) -> Bool {
    guard let x = try? ModelStore.encode(a), let y = try? ModelStore.encode(b) else { return false }  // unencodable: say changed
    return x == y
  }
}

/// What a ``ModelResultsController`` delivers.
public enum ResultsChange<T: Model>: Sendable {
  case initial([ResultsSection<T>])
  case update([ResultsSection<T>], ResultsChangeSet)

  public var sections: [ResultsSection<T>] {
    switch self {
    case .initial(let sections), .update(let sections, _): sections
    }
  }

  /// `previous` with the change set applied in a table view's order: remove deleted and
  /// moved-away rows (bottom up) and deleted sections, insert new sections with their rows,
  /// then inserted and moved-in rows (top down), then replace the updated rows' content.
  public func applied(to previous: [ResultsSection<T>]) -> [ResultsSection<T>] {
    guard case .update(let sections, let changes) = self else { return self.sections }
    var table = previous
    let updated = changes.rowUpdates.map { previous[$0.section].models[$0.row].id }
    for path in (changes.rowDeletions + changes.rowMoves.map(\.from)).sorted(by: >) {
      table[path.section].models.remove(at: path.row)
    }
    for s in changes.sectionDeletions.reversed() { table.remove(at: s) }
    for s in changes.sectionInsertions { table.insert(sections[s], at: s) }
    for path in (changes.rowInsertions + changes.rowMoves.map(\.to)).sorted() {
      table[path.section].models.insert(sections[path.section].models[path.row], at: path.row)
    }
    // An updated row stayed in place, so it now sits where the new sections have it.
    let wanted = Set(updated)
    for s in table.indices {
      for r in table[s].models.indices where wanted.contains(table[s].models[r].id) {
        table[s].models[r] = sections[s].models[r]
      }
    }
    return table
  }
}
