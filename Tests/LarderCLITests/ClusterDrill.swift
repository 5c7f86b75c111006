import Foundation
import LarderTestSupport
import Synchronization

/// Clients uploading, downloading and deleting through every node of a cluster of `larder
/// serve` processes on one store while `larder gc --grace 0s` runs over and over; then every
/// acknowledged object is downloaded again, exactly. Half of the uploads are one of four shared
/// contents, so rows keep becoming orphans the collector deletes while another upload of the
/// same bytes dedupes against them.
struct ClusterDrill {
  let nodes: [ServedLarder]
  /// `gc --grace 0s …` with the store's options.
  let gcArguments: [String]
  let environment: [String: String]
  let workers: Int
  let seconds: Double
  /// Every `sharedEvery`-th upload is one of the shared contents (the rest are unique), and
  /// every `deleteEvery`-th object is deleted again.
  var sharedEvery = 2
  var deleteEvery = 3

  struct Outcome {
    var uploads = 0
    var downloads = 0
    var deletes = 0
    var errors: [String] = []
    var kept: [(name: String, bytes: [UInt8])] = []
    var gcRuns = 0
    var gcFailures: [String] = []
    /// Acknowledged objects that did not download exactly afterwards.
    var lost = 0

    var summary: String {
      "\(uploads) uploads, \(downloads) downloads, \(deletes) deletes over the nodes, \(gcRuns) gc runs, "
        + "\(errors.count) errors, \(lost) of \(kept.count) kept objects lost"
    }
  }

  func run() throws -> Outcome {
    let shared = (0..<4).map { pseudoRandomBytes(20_000 + $0 * 7_000, seed: 1000 + UInt64($0)) }
    let (sharedEvery, deleteEvery) = (self.sharedEvery, self.deleteEvery)
    let tally = Mutex(Outcome())
    let stop = Atomic<Bool>(false)
    let gcRuns = Atomic<Int>(0)
    let gcFailures = Mutex<[String]>([])
    let (gcArguments, environment) = (self.gcArguments, self.environment)
    let collector = Thread {
      while !stop.load(ordering: .relaxed) {
        do {
          let r = try CLI.larder(gcArguments, environment: environment)
          if r.status == 0 {
            gcRuns.add(1, ordering: .relaxed)
          } else {
            gcFailures.withLock { $0.append(r.stderr) }
          }
        } catch {
          gcFailures.withLock { $0.append("\(error)") }
        }
      }
    }
    collector.start()
    let deadline = Date().addingTimeInterval(seconds)
    // A thread per client (concurrentPerform would run only as many as there are cores).
    let finished = DispatchSemaphore(value: 0)
    let nodes = self.nodes
    for w in 0..<workers {
      let thread = Thread {
        defer { finished.signal() }
        Self.client(
          w, nodes: nodes, shared: shared, every: (shared: sharedEvery, delete: deleteEvery), until: deadline,
          tally: tally)
      }
      thread.stackSize = 512 << 10
      thread.start()
    }
    for _ in 0..<workers { finished.wait() }
    stop.store(true, ordering: .relaxed)
    while !collector.isFinished { usleep(50_000) }
    // One more collection with everything settled, then every acknowledged object, exactly.
    let last = try CLI.larder(gcArguments, environment: environment)
    var outcome = tally.withLock { $0 }
    outcome.gcRuns = gcRuns.load(ordering: .relaxed)
    outcome.gcFailures = gcFailures.withLock { $0 } + (last.status == 0 ? [] : [last.stderr])
    for (index, object) in outcome.kept.enumerated() {
      let get = try Self.download(nodes[index % nodes.count], object.name)
      if get.status != 200 || get.body != object.bytes { outcome.lost += 1 }
    }
    return outcome
  }

  static func upload(_ node: ServedLarder, _ name: String, _ bytes: [UInt8]) throws -> RawResponse {
    try node.exchange(
      "POST", "/v0/b/app/o?name=\(name)", headers: [("Content-Type", "application/octet-stream")], body: bytes
    )
  }

  static func download(_ node: ServedLarder, _ name: String, range: String? = nil) throws -> RawResponse {
    try node.exchange("GET", "/v0/b/app/o/\(name)?alt=media", headers: range.map { [("Range", $0)] } ?? [])
  }

  /// One client: upload through one node, download through the next (exact bytes), and delete
  /// every `every.delete`-th object, until `deadline`.
  static func client(
    _ w: Int, nodes: [ServedLarder], shared: [[UInt8]], every: (shared: Int, delete: Int), until deadline: Date,
    tally: borrowing Mutex<Outcome>
  ) {
    var i = 0
    while Date() < deadline {
      i += 1
      let name = "w\(w)-\(i).bin"
      let bytes =
        i % every.shared == 0
        ? shared[(w + i) % shared.count]
        : pseudoRandomBytes(1 + (w * 7919 + i * 104_729) % 300_000, seed: UInt64(w * 100_000 + i))
      let up = nodes[(w + i) % nodes.count]
      let down = nodes[(w + i + 1) % nodes.count]
      do {
        let put = try upload(up, name, bytes)
        guard put.status == 200 else { throw HarnessFailure("upload \(name): \(put.status) \(put.text)") }
        let get = try download(down, name)
        guard get.status == 200, get.body == bytes else {
          throw HarnessFailure("download \(name): \(get.status), \(get.body.count) of \(bytes.count) bytes")
        }
        if i % every.delete == 0 {
          let delete = try down.exchange("DELETE", "/v0/b/app/o/\(name)")
          guard delete.status == 204 || delete.status == 200 else {
            throw HarnessFailure("delete \(name): \(delete.status)")
          }
          tally.withLock { $0.deletes += 1 }
        } else {
          tally.withLock { $0.kept.append((name, bytes)) }
        }
        tally.withLock {
          $0.uploads += 1
          $0.downloads += 1
        }
      } catch {
        tally.withLock { $0.errors.append("\(error)") }
      }
    }
  }
}
