import Foundation
import Synchronization

/// Larder's own HTTP/1.1 engine: one epoll event loop per thread (`threadPoolSize` of them), each
/// watching the shared listen socket with `EPOLLEXCLUSIVE` and its own connections edge-triggered.
///
/// The loops only move bytes: they read, parse heads, decode chunked bodies and write answers
/// (`writev`, `sendfile`). Everything that may block — the handler's `head`, a sink's `receive`,
/// `finish` and `cancel`, reading a stream body's pipe — runs on the worker pool and posts its
/// result back to the connection's loop, so a slow commit or a stalled store read never stops a
/// loop from serving other connections. While a sink works on a chunk the connection reads no
/// more (back-pressure towards the client); while the socket is full the body's next chunk is not
/// produced (back-pressure towards the handler).
final class EpollServer: @unchecked Sendable {
  let configuration: HTTPServer.Configuration
  let handler: any HTTPHandler
  let metrics: Metrics
  let accessLog: AccessLog
  let listen: ListenSocket
  let connectionLimit: Int
  let maxLingering: Int
  let workers: WorkerPool

  let inFlight = Atomic<Int>(0)
  let contextsMade = Atomic<Int>(0)
  let contextsEnded = Atomic<Int>(0)
  /// Connections accepted and not yet closed (refused ones lingering excluded).
  let openConnections = Atomic<Int>(0)
  let lingering = Atomic<Int>(0)
  let draining = Atomic<Bool>(false)
  private let perAddress = Mutex<[String: Int]>([:])
  private(set) var loops: [EventLoop] = []

  /// Bytes of a refused body read and thrown away while lingering (RFC 9112 §9.6), so a client
  /// that writes its whole body before reading gets the answer rather than a reset.
  static let discardBudget = 64 << 20
  /// How long a refused client gets to finish sending and read the answer.
  static let lingerTime = Duration.seconds(10)

  init(
    configuration: HTTPServer.Configuration, handler: any HTTPHandler, metrics: Metrics, accessLog: AccessLog,
    listen: ListenSocket, connectionLimit: Int, maxLingering: Int
  ) {
    self.configuration = configuration
    self.handler = handler
    self.metrics = metrics
    self.accessLog = accessLog
    self.listen = listen
    self.connectionLimit = connectionLimit
    self.maxLingering = maxLingering
    // Handlers block (catalog commits, fsync, hashing, store reads): several per loop.
    workers = WorkerPool(count: max(8, 4 * configuration.threadPoolSize), name: "http-worker")
  }

  func start() throws(HTTPServerError) {
    for index in 0..<max(1, configuration.threadPoolSize) {
      guard let loop = EventLoop(server: self, index: index) else {
        for loop in loops { loop.stop() }
        throw .daemonStartFailed
      }
      loops.append(loop)
    }
    for loop in loops { loop.start() }
  }

  /// Stops accepting, lets requests in flight finish until `deadline`, then closes everything.
  func shutdown(deadline: ContinuousClock.Instant) -> Bool {
    draining.store(true, ordering: .relaxed)
    for loop in loops { loop.post(Job { loop.beginDrain() }) }
    // The kernel then refuses new connections instead of queueing them in the backlog.
    Glibc.shutdown(listen.descriptor, Int32(SHUT_RDWR))
    var drained = true
    while inFlight.load(ordering: .relaxed) > 0 {
      if ContinuousClock.now >= deadline {
        drained = false
        break
      }
      usleep(5_000)
    }
    for loop in loops { loop.stop() }
    workers.stop()
    accessLog.flush()
    close(listen.descriptor)
    return drained
  }

  /// At the connection limit new connections wait in the listen backlog, costing no descriptor,
  /// until one closes.
  var isFull: Bool { openConnections.load(ordering: .relaxed) >= connectionLimit }

  /// Takes one of the `connectionLimit` slots before a loop accepts; false when none is free.
  /// Taken in one step, so loops accepting at once never pass the limit together.
  func reserveSlot() -> Bool {
    var current = openConnections.load(ordering: .relaxed)
    while current < connectionLimit {
      let (exchanged, original) = openConnections.compareExchange(
        expected: current, desired: current + 1, ordering: .relaxed)
      if exchanged { return true }
      current = original
    }
    return false
  }

  /// Gives back a slot taken by ``reserveSlot()`` that no connection holds.
  func returnSlot() { openConnections.subtract(1, ordering: .relaxed) }

  /// Counts a connection from `address` (its slot already reserved); false when its address is
  /// at its limit.
  func admit(_ address: String) -> Bool {
    let limit = configuration.perIPConnectionLimit
    return perAddress.withLock { counts -> Bool in
      let current = counts[address, default: 0]
      if limit > 0 && current >= limit { return false }
      counts[address] = current + 1
      return true
    }
  }

  func release(_ address: String) {
    returnSlot()
    perAddress.withLock { counts in
      let left = counts[address, default: 1] - 1
      counts[address] = left > 0 ? left : nil
    }
  }

  /// Records a request's end exactly once.
  func end(_ context: RequestContext, outcome: String, remote: String) {
    guard !context.ended else { return }
    context.ended = true
    contextsEnded.add(1, ordering: .relaxed)
    defer { inFlight.subtract(1, ordering: .relaxed) }
    context.record(outcome: outcome, metrics: metrics, accessLog: accessLog, remote: { remote })
  }
}

/// Threads that run blocking work, first come first served: the engine's (work the loops hand
/// over), or an application's own for requests that wait on something of theirs
/// (``Router/runOn(_:pool:when:)``), so they do not take the engine's.
public final class WorkerPool: @unchecked Sendable {
  private let condition = NSCondition()
  private var jobs: [Job] = []
  private var head = 0
  private var stopped = false

  /// Starts `count` threads named `name-N` (the kernel's name: 15 bytes at most).
  public init(count: Int, name: String) {
    for index in 0..<count {
      let thread = Thread { [self] in
        LinuxIO.nameThisThread("\(name)-\(index)")
        run()
      }
      thread.name = "larder-\(name)-\(index)"
      thread.stackSize = 1 << 20
      thread.start()
    }
  }

  public func submit(_ job: @escaping () -> Void) {
    condition.lock()
    jobs.append(Job(run: job))
    condition.signal()
    condition.unlock()
  }

  /// Lets the threads end once the queue is empty (a job running keeps its thread until it returns).
  public func stop() {
    condition.lock()
    stopped = true
    condition.broadcast()
    condition.unlock()
  }

  private func run() {
    while true {
      condition.lock()
      while head == jobs.count && !stopped { condition.wait() }
      if head == jobs.count {
        condition.unlock()
        return
      }
      let job = jobs[head]
      head += 1
      if head > 1024 && head * 2 > jobs.count {
        jobs.removeFirst(head)
        head = 0
      }
      condition.unlock()
      job.run()
    }
  }
}

/// One epoll loop: its thread, its connections (touched by this thread only), and an inbox of
/// continuations posted by workers.
final class EventLoop: @unchecked Sendable {
  unowned let server: EpollServer
  let index: Int
  let epoll: Int32
  let wake: Int32
  private var connections: [Int32: Connection] = [:]
  /// Continuations posted by workers; `closed` once the loop has ended (a late one then runs
  /// on the poster's thread, where it only finds its connection closed and releases what it held).
  private let inbox = Mutex<(jobs: [Job], closed: Bool)>(([], false))
  private var dateSecond = 0
  private var cachedDate = ""
  private let stopping = Atomic<Bool>(false)
  private let exited = Atomic<Bool>(false)
  private var accepting = true
  /// Not watching the listen socket while the server is full (``EpollServer/isFull``).
  private var paused = false
  private var lastTick = ContinuousClock.now

  static let listenKey = UInt64.max
  static let wakeKey = UInt64.max - 1

  init?(server: EpollServer, index: Int) {
    self.server = server
    self.index = index
    epoll = LinuxIO.epollCreate()
    wake = LinuxIO.eventDescriptor()
    guard epoll >= 0, wake >= 0,
      LinuxIO.add(epoll, wake, events: LinuxIO.readable | LinuxIO.edgeTriggered, data: Self.wakeKey),
      LinuxIO.add(
        epoll, server.listen.descriptor, events: LinuxIO.readable | LinuxIO.exclusive, data: Self.listenKey)
    else {
      if epoll >= 0 { close(epoll) }
      if wake >= 0 { close(wake) }
      return nil
    }
  }

  func start() {
    let thread = Thread { [self] in
      LinuxIO.nameThisThread("http-loop-\(index)")
      run()
    }
    thread.name = "larder-http-loop-\(index)"
    thread.start()
  }

  /// Runs `job` on this loop's thread soon.
  func post(_ job: Job) {
    let queued = inbox.withLock { inbox -> Bool in
      guard !inbox.closed else { return false }
      inbox.jobs.append(job)
      return true
    }
    guard queued else { return job.run() }
    var one: UInt64 = 1
    _ = write(wake, &one, 8)
  }

  /// The `Date` header's value, formatted once a second.
  var date: String {
    let now = time(nil)
    if now != dateSecond {
      dateSecond = now
      cachedDate = HTTPDate.format(Date(timeIntervalSince1970: TimeInterval(now)))
    }
    return cachedDate
  }

  /// Ends the loop (closing every connection still open) and waits for it.
  func stop() {
    stopping.store(true, ordering: .relaxed)
    var one: UInt64 = 1
    _ = write(wake, &one, 8)
    let deadline = ContinuousClock.now + .seconds(5)
    while !exited.load(ordering: .relaxed) && ContinuousClock.now < deadline { usleep(1_000) }
  }

  /// Stops accepting and closes connections waiting for a request that has not begun.
  func beginDrain() {
    if accepting {
      accepting = false
      if !paused { LinuxIO.remove(epoll, server.listen.descriptor) }
    }
    for connection in Array(connections.values) {
      if connection.isIdle { connection.close(outcome: nil) } else { connection.hurry() }
    }
  }

  func forget(_ connection: Connection) {
    connections.removeValue(forKey: connection.fd)
    resumeAccepting()
  }

  private func resumeAccepting() {
    guard paused, accepting, !server.isFull else { return }
    paused = false
    LinuxIO.add(
      epoll, server.listen.descriptor, events: LinuxIO.readable | LinuxIO.exclusive, data: Self.listenKey)
  }

  private func run() {
    let capacity = 256
    let events = UnsafeMutablePointer<UInt32>.allocate(capacity: capacity)
    let data = UnsafeMutablePointer<UInt64>.allocate(capacity: capacity)
    defer {
      events.deallocate()
      data.deallocate()
    }
    while !stopping.load(ordering: .relaxed) {
      let n = LinuxIO.wait(epoll, events: events, data: data, capacity: capacity, timeout: 250)
      for i in 0..<max(0, n) {
        switch data[i] {
        case Self.listenKey: acceptAll()
        case Self.wakeKey:
          var value: UInt64 = 0
          _ = read(wake, &value, 8)
        default:
          connections[Int32(truncatingIfNeeded: data[i])]?.onEvents(events[i])
        }
      }
      let jobs = inbox.withLock { inbox -> [Job] in
        defer { inbox.jobs.removeAll(keepingCapacity: true) }
        return inbox.jobs
      }
      for job in jobs { job.run() }
      let now = ContinuousClock.now
      if now - lastTick > .milliseconds(250) {
        lastTick = now
        resumeAccepting()
        for connection in Array(connections.values) { connection.checkTimeouts(now: now) }
      }
    }
    for connection in Array(connections.values) { connection.close(outcome: "shutdown") }
    let late = inbox.withLock { inbox -> [Job] in
      inbox.closed = true
      defer { inbox.jobs = [] }
      return inbox.jobs
    }
    for job in late { job.run() }
    close(epoll)
    close(wake)
    exited.store(true, ordering: .relaxed)
  }

  private func acceptAll() {
    while accepting {
      guard server.reserveSlot() else {
        paused = true
        LinuxIO.remove(epoll, server.listen.descriptor)
        return
      }
      let fd = LinuxIO.accept(server.listen.descriptor)
      if fd < 0 {
        let error = errno
        server.returnSlot()
        if error == EINTR || error == ECONNABORTED { continue }
        if error == EMFILE || error == ENFILE {
          server.configuration.logger.warning("accept: out of descriptors")
        }
        return
      }
      var one: Int32 = 1
      setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
      let address = Self.peerAddress(fd)
      guard !server.draining.load(ordering: .relaxed), server.admit(address) else {
        server.returnSlot()
        refuse(fd)
        continue
      }
      let connection = Connection(fd: fd, loop: self, remote: address)
      connections[fd] = connection
      guard
        LinuxIO.add(
          epoll, fd,
          events: LinuxIO.readable | LinuxIO.writable | LinuxIO.peerHalfClosed | LinuxIO.edgeTriggered,
          data: UInt64(UInt32(bitPattern: fd)))
      else {
        connection.close(outcome: nil)
        continue
      }
      connection.advance()
    }
  }

  /// Past the per-address limit: a 503 with `Retry-After`, then a lingering close so the client
  /// reads it rather than a reset.
  private func refuse(_ fd: Int32) {
    let response = HTTPResponse.error(status: 503, message: "too many connections; retry later")
    var head = "HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\n"
    for field in response.headers { head += "\(field.name): \(field.value)\r\n" }
    var bytes = Array(head.utf8)
    if case .bytes(let body) = response.body {
      bytes += Array("Content-Length: \(body.count)\r\nConnection: close\r\n\r\n".utf8) + body
    }
    _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    guard server.lingering.load(ordering: .relaxed) < server.maxLingering else {
      close(fd)
      return
    }
    let connection = Connection(fd: fd, loop: self, remote: "", counted: false)
    connections[fd] = connection
    guard
      LinuxIO.add(
        epoll, fd, events: LinuxIO.readable | LinuxIO.peerHalfClosed | LinuxIO.edgeTriggered,
        data: UInt64(UInt32(bitPattern: fd)))
    else {
      connection.close(outcome: nil)
      return
    }
    connection.linger()
  }

  static func peerAddress(_ fd: Int32) -> String {
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    let got = withUnsafeMutablePointer(to: &storage) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
    }
    guard got == 0 else { return "" }
    return withUnsafePointer(to: &storage) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress.text($0) }
    }
  }
}
