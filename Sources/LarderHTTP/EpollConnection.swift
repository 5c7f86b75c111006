import Foundation
import Synchronization

/// One request and its answer on a connection. HTTP/1.1 runs them one after another (answers
/// go out in order); the connection holds its current one, so a multiplexing protocol can hold
/// several without changing this type.
final class Exchange {
  let context: RequestContext
  let request: HTTPRequest
  /// A body follows the head (declared by `Content-Length` > 0 or chunked).
  let hasBody: Bool
  let expectsContinue: Bool
  var sink: (any HTTPBodySink)?
  /// `Content-Length` bytes still to come.
  var remaining: Int64
  var chunked: ChunkedDecoder?
  /// A chunked body's decoded bytes, handed to the sink (storage reused between pieces).
  var decoded: [UInt8] = []

  init(context: RequestContext, request: HTTPRequest, hasBody: Bool, expectsContinue: Bool, chunked: Bool) {
    self.context = context
    self.request = request
    self.hasBody = hasBody
    self.expectsContinue = expectsContinue
    remaining = chunked ? 0 : max(0, request.contentLength ?? 0)
    self.chunked = chunked ? ChunkedDecoder() : nil
  }

  var bodyComplete: Bool { chunked.map(\.isDone) ?? (remaining == 0) }
}

/// A closure handed between a loop and the workers. The state it touches is owned by whichever
/// side runs it (see ``Connection``), which the type system cannot see.
struct Job: @unchecked Sendable {
  let run: () -> Void
}

/// A client connection on an event loop: its input buffer, the request head parser, the
/// current exchange and the answer being written.
///
/// Everything here runs on the loop's thread, except while `phase` is `.working`: then one
/// worker owns the exchange (it runs the handler or the sink) and the loop neither reads nor
/// writes, until the worker posts its continuation back. A close meanwhile only marks the
/// connection closed; the continuation sees that and releases what the worker held.
final class Connection: @unchecked Sendable {
  enum Phase: Equatable {
    case head
    case working
    /// A handler answers later (``HTTPResponder``): no thread holds the exchange.
    case waiting
    case body
    case responding
    case lingering
    case closed
  }

  let fd: Int32
  unowned let loop: EventLoop
  let remote: String
  /// Counted against the connection limits (a refused connection lingering is not).
  let counted: Bool
  var server: EpollServer { loop.server }

  private(set) var phase = Phase.head
  private let buffer: UnsafeMutableRawBufferPointer
  private var count = 0
  private var parser = RequestHeadParser()
  private var exchange: Exchange?
  private var lastActivity = ContinuousClock.now
  /// Waiting for a request head since (accept, or the end of the previous answer).
  private var headSince: ContinuousClock.Instant? = .now
  private var closeAfter = false
  private var lingerAfter = false
  private var lingerDeadline = ContinuousClock.now
  private var discarded = 0
  private var minorVersion = 1
  /// A body's worker may read the socket (see `deliver`): a close then leaves the descriptor to
  /// the worker's continuation (`closePending`).
  private var workerOwnsSocket = false
  private var closePending = false
  /// The completion of the exchange answered later (phase `.waiting`).
  private var responder: HTTPResponder?

  private var out: [UInt8] = []
  private var outOffset = 0
  private var outBody: [UInt8] = []
  private var outBodyOffset = 0
  private var file: (fd: Int32, offset: Int64, remaining: Int64)?
  private var stream: (fd: Int32, remaining: Int64)?

  init(fd: Int32, loop: EventLoop, remote: String, counted: Bool = true) {
    self.fd = fd
    self.loop = loop
    self.remote = remote
    self.counted = counted
    let c = loop.server.configuration
    parser.maxHeaderBytes = c.maxHeaderBytes
    // Room for the longest head the parser accepts, so a full buffer always means a refusal.
    let capacity = max(c.connectionMemoryLimit, parser.maxRequestLine + c.maxHeaderBytes + 256)
    buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 16)
    out.reserveCapacity(512)
  }

  deinit { buffer.deallocate() }

  /// Waiting for a request that has not begun: safe to close when draining.
  var isIdle: Bool { phase == .head && count == 0 && exchange == nil }

  /// A short read emptied the socket: until epoll reports more, another read would only say
  /// EAGAIN (a system call per request saved). Safe because connections are edge-triggered: every
  /// arrival after that read is reported. Not trusted once the peer half-closed, whose FIN may
  /// have come with the data the short read took (no edge would follow it).
  private var drained = false
  private var peerClosing = false

  func onEvents(_ events: UInt32) {
    drained = false
    if events & (LinuxIO.peerHalfClosed | LinuxIO.hangUp | LinuxIO.error) != 0 { peerClosing = true }
    advance()
  }

  /// Moves the connection on as far as it can without waiting.
  func advance() {
    while true {
      switch phase {
      case .closed, .working:
        return
      case .waiting:
        watchWhileWaiting()
        return
      case .lingering:
        drainLinger()
        return
      case .responding:
        switch flush() {
        case .wait: return
        case .failed:
          close(outcome: "client_abort")
          return
        case .done: finishResponse()
        }
      case .head:
        if count > 0 {
          switch parser.parse(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count])) {
          case .complete(let length):
            begin(headLength: length)
            continue
          case .failed(let error):
            refuse(error)
            continue
          case .incomplete:
            if count == buffer.count {
              refuse(.headersTooLarge(limit: server.configuration.maxHeaderBytes))
              continue
            }
          }
        }
        if !fill() { return }
      case .body:
        if !pumpBody() { return }
      }
    }
  }

  // MARK: Reading

  /// Reads what the socket holds into the buffer; false when nothing came (or the peer left).
  private func fill() -> Bool {
    guard count < buffer.count, !drained else { return false }
    while true {
      let space = buffer.count - count
      let n = recv(fd, buffer.baseAddress! + count, space, 0)
      if n > 0 {
        count += n
        drained = n < space && !peerClosing
        lastActivity = .now
        return true
      }
      if n < 0 && errno == EINTR { continue }
      if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return false }
      close(outcome: exchange == nil ? nil : "client_abort")
      return false
    }
  }

  private func consume(_ n: Int) {
    guard n > 0 else { return }
    if n < count { memmove(buffer.baseAddress!, buffer.baseAddress! + n, count - n) }
    count -= n
  }

  /// A complete head of `headLength` bytes is at the start of the buffer.
  private func begin(headLength: Int) {
    let raw = UnsafeRawBufferPointer(rebasing: buffer[0..<headLength])
    func text(_ r: Range<Int>) -> String { String(decoding: raw[r], as: UTF8.self) }
    let method = text(parser.method)
    let target = text(parser.target)
    var headers = HTTPHeaders(capacity: parser.fields.count)
    for field in parser.fields { headers.add(text(field.name), text(field.value)) }
    minorVersion = parser.minorVersion
    let version = minorVersion == 1 ? "HTTP/1.1" : "HTTP/1.0"
    consume(headLength)
    parser.reset()
    headSince = nil

    let context = RequestContext(rawTarget: target)
    context.method = method
    server.inFlight.add(1, ordering: .relaxed)
    server.contextsMade.add(1, ordering: .relaxed)
    // Persistence (RFC 9112 §9.3): 1.1 unless `close`, 1.0 only with `keep-alive`.
    // (`contains` is Foundation's substring search: not run for the usual head without the field.)
    let tokens = headers.values(for: "Connection").joined(separator: ",").lowercased()
    func says(_ token: String) -> Bool { !tokens.isEmpty && tokens.contains(token) }
    closeAfter = minorVersion == 0 ? !says("keep-alive") : says("close")
    let chunked = headers.contains("Transfer-Encoding")
    let declaresBody = chunked || (headers["Content-Length"].map { $0 != "0" } ?? false)

    let request: HTTPRequest
    do {
      request = try HTTPRequest(
        method: method, target: target, headers: headers, remoteAddress: remote, id: headers["X-Request-Id"],
        version: version)
    } catch {
      let fallback = HTTPRequest(
        unvalidated: method, target: target, headers: headers, remoteAddress: remote,
        id: headers["X-Request-Id"], version: version)
      context.request = fallback
      exchange = Exchange(
        context: context, request: fallback, hasBody: declaresBody, expectsContinue: false, chunked: false)
      let framing = HTTPRequest.framingError(headers: headers, version: version)
      respond(
        server.handler.errorResponse(for: framing ?? error, request: fallback),
        unreadBody: framing != nil || declaresBody)
      return
    }
    context.request = request
    let expects =
      minorVersion == 1 && headers["Expect"].map { HTTPHeaders.same($0, "100-continue") } == true
    let exchange = Exchange(
      context: context, request: request, hasBody: declaresBody, expectsContinue: expects, chunked: chunked)
    self.exchange = exchange
    if let framing = HTTPRequest.framingError(headers: headers, version: version) {
      respond(server.handler.errorResponse(for: framing, request: request), unreadBody: true)
      return
    }
    if let limit = server.configuration.maxBodyBytes, let declared = request.contentLength, declared > limit {
      respond(
        server.handler.errorResponse(for: HTTPRequestError.bodyTooLarge(limit: limit), request: request),
        unreadBody: declaresBody)
      return
    }
    switch server.handler.start(request) {
    case .now(let decision):
      // Answered on this loop: the caller's `advance` goes on from the new phase.
      decided(decision, exchange, resume: false)
    case .onWorker(let head):
      phase = .working
      server.workers.submit { [self] in
        let decision = head()
        if case .later(let start) = decision.action {
          answerLater(start, decision.routeLabel, exchange)
        } else {
          loop.post(Job { self.decided(decision, exchange, resume: true) })
        }
      }
    case .later(let route, let start):
      phase = .working
      answerLater(start, route, exchange)
    }
  }

  /// Starts an answer given later, on the thread that decided: the loop learns first (the inbox
  /// keeps order, so the answer cannot overtake it), then `start` gets the responder.
  private func answerLater(
    _ start: @Sendable (HTTPResponder) -> Void, _ route: String?, _ exchange: Exchange
  ) {
    let handler = server.handler
    let request = exchange.request
    // Touched only on the loop, by the continuation the answer posts (as `Job`s are).
    nonisolated(unsafe) let exchange = exchange
    let responder = HTTPResponder(
      deliver: { [self] decision in
        loop.post(Job { self.laterDecided(decision, exchange) })
        return true
      },
      mapError: { handler.errorResponse(for: $0, request: request) })
    loop.post(Job { self.wait(for: responder, route: route, exchange) })
    start(responder)
  }

  /// On the loop: the exchange waits for `responder`, holding no thread.
  private func wait(for responder: HTTPResponder, route: String?, _ exchange: Exchange) {
    guard phase != .closed, self.exchange === exchange else {
      responder.stopWaiting(closed: true)
      return
    }
    exchange.context.routeLabel = route
    self.responder = responder
    phase = .waiting
    if server.draining.load(ordering: .relaxed) { responder.stopWaiting(closed: false) }
    advance()
  }

  /// On the loop: the later answer came (the responder lets one through).
  private func laterDecided(_ decision: HTTPHeadDecision, _ exchange: Exchange) {
    guard phase == .waiting, self.exchange === exchange else {
      if case .receiveBody(let sink) = decision.action { sink.cancel() }
      return
    }
    responder = nil
    phase = .working
    // The idle timeout counts from the answer, not from the request's head.
    lastActivity = .now
    decided(decision, exchange, resume: true)
  }

  /// While waiting, reads what the client sends (a pipelined request stays in the buffer for
  /// after the answer), so a client that goes away ends the wait rather than holding its
  /// connection until the answer.
  private func watchWhileWaiting() {
    while count < buffer.count {
      let n = recv(fd, buffer.baseAddress! + count, buffer.count - count, 0)
      if n > 0 {
        count += n
        continue
      }
      if n < 0 && errno == EINTR { continue }
      if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
      close(outcome: "client_abort")
      return
    }
  }

  /// The handler judged the head, here or on a worker (then `resume`: back on the loop, which
  /// must move the connection on).
  private func decided(_ decision: HTTPHeadDecision, _ exchange: Exchange, resume: Bool) {
    guard phase != .closed else {
      if case .receiveBody(let sink) = decision.action { sink.cancel() }
      return
    }
    exchange.context.routeLabel = decision.routeLabel
    switch decision.action {
    case .later(let start):
      // Nothing more happens on this connection until the answer (`wait(for:)` comes first).
      phase = .working
      answerLater(start, decision.routeLabel, exchange)
      return
    case .respond(let response):
      respond(response, unreadBody: exchange.hasBody)
    case .receiveBody(let sink):
      exchange.sink = sink
      exchange.context.sink = sink
      // The head is judged: only now is the client told to send its body.
      if exchange.expectsContinue && exchange.hasBody && count == 0 {
        out.append(contentsOf: "HTTP/1.1 100 Continue\r\n\r\n".utf8)
      }
      phase = .body
    }
    if resume { advance() }
  }

  /// Hands the next piece of the body to the sink, or finishes; false when waiting for bytes.
  private func pumpBody() -> Bool {
    guard let exchange, let sink = exchange.sink else { return false }
    if outOffset < out.count {
      switch flush() {
      case .wait: return false
      case .failed:
        close(outcome: "client_abort")
        return false
      case .done: break
      }
    }
    if count > 0 && !exchange.bodyComplete {
      let piece: Piece
      if var decoder = exchange.chunked {
        var decoded = exchange.decoded
        decoded.removeAll(keepingCapacity: true)
        let used: Int
        do {
          used = try decoder.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) {
            decoded.append(contentsOf: $0)
          }
        } catch {
          exchange.chunked = decoder
          fail(error, exchange)
          return true
        }
        exchange.chunked = decoder
        exchange.decoded = decoded
        consume(used)
        piece = .decoded(decoded)
      } else {
        let n = Int(min(exchange.remaining, Int64(count)))
        exchange.remaining -= Int64(n)
        piece = .buffered(n)
      }
      if piece.count > 0 {
        exchange.context.bytesIn += Int64(piece.count)
        if let limit = server.configuration.maxBodyBytes, exchange.context.bytesIn > limit {
          fail(HTTPRequestError.bodyTooLarge(limit: limit), exchange)
          return true
        }
        deliver(piece, sink: sink, exchange)
        return true
      }
    }
    if exchange.bodyComplete {
      finishBody(sink, exchange)
      return true
    }
    return fill()
  }

  /// Body bytes for a sink: the first `n` bytes of the input buffer (a `Content-Length` body,
  /// handed over without a copy), or a chunked body's decoded bytes.
  private enum Piece {
    case buffered(Int)
    case decoded([UInt8])

    var count: Int {
      switch self {
      case .buffered(let n): n
      case .decoded(let bytes): bytes.count
      }
    }
  }

  /// The sink takes `piece` on a worker; the loop reads nothing more meanwhile, so the input
  /// buffer holding it is untouched until the worker is done. A `Content-Length` body's worker
  /// then reads on from the socket itself while bytes are waiting (a fast client's usually are),
  /// so a large body is not handed from the loop to a worker and back for every buffer's worth;
  /// it gives the connection back when the socket is empty, the body complete, or after
  /// ``workerReadRounds`` pieces. While it may read, a close only marks the socket to be closed
  /// by its continuation, so the worker never reads a descriptor that was closed and reused.
  private func deliver(_ piece: Piece, sink: any HTTPBodySink, _ exchange: Exchange) {
    phase = .working
    let input = UnsafeRawBufferPointer(buffer)
    let readsOn = exchange.chunked == nil
    workerOwnsSocket = readsOn
    server.workers.submit { [self] in
      var failure: (any Error)?
      var piece = piece
      var rounds = 0
      while true {
        do {
          switch piece {
          case .buffered(let n): try sink.receive(UnsafeRawBufferPointer(rebasing: input[0..<n]))
          case .decoded(let bytes): try bytes.withUnsafeBytes { try sink.receive($0) }
          }
        } catch {
          failure = error
          break
        }
        guard readsOn, case .buffered(let n) = piece else { break }
        consume(n)
        piece = .buffered(0)
        rounds += 1
        guard exchange.remaining > 0, rounds < Self.workerReadRounds else { break }
        if count == 0 {
          // Non-blocking: nothing waiting (or the peer gone) gives the connection back to the
          // loop, which sees the same state on its own read.
          let got = recv(fd, buffer.baseAddress!, buffer.count, 0)
          guard got > 0 else { break }
          count = got
          lastActivity = .now
        }
        // No body limit to check: a `Content-Length` over it was refused with the head.
        let m = Int(min(exchange.remaining, Int64(count)))
        exchange.remaining -= Int64(m)
        exchange.context.bytesIn += Int64(m)
        piece = .buffered(m)
      }
      loop.post(
        Job {
          self.workerOwnsSocket = false
          guard self.phase != .closed else {
            if self.closePending { Glibc.close(self.fd) }
            self.cancelSink(exchange)
            return
          }
          if case .buffered(let n) = piece { self.consume(n) }
          if let failure {
            self.fail(failure, exchange)
          } else {
            self.phase = .body
          }
          self.advance()
        })
    }
  }

  /// Pieces a body's worker takes from the socket before giving the connection back to its
  /// loop (64 KiB each with the default connection memory): a bound on how long one upload
  /// holds a worker while others wait.
  static let workerReadRounds = 256

  private func finishBody(_ sink: any HTTPBodySink, _ exchange: Exchange) {
    phase = .working
    exchange.context.sinkSettled = true
    let handler = server.handler
    server.workers.submit { [self] in
      let response: HTTPResponse
      do {
        response = try sink.finish()
      } catch {
        response = handler.errorResponse(for: error, request: exchange.request)
      }
      loop.post(
        Job {
          guard self.phase != .closed else { return }
          self.respond(response, unreadBody: false)
          self.advance()
        })
    }
  }

  /// The body cannot be taken: the sink is cancelled (its temporary file and locks released)
  /// before the answer can reach the client, and the rest of the body is never read.
  private func fail(_ error: any Error, _ exchange: Exchange) {
    phase = .working
    let sink = exchange.context.sinkSettled ? nil : exchange.sink
    exchange.context.sinkSettled = true
    let handler = server.handler
    server.workers.submit { [self] in
      sink?.cancel()
      let response = handler.errorResponse(for: error, request: exchange.request)
      loop.post(
        Job {
          guard self.phase != .closed else { return }
          self.respond(response, unreadBody: true)
          self.advance()
        })
    }
  }

  private func cancelSink(_ exchange: Exchange) {
    guard let sink = exchange.sink, !exchange.context.sinkSettled else { return }
    exchange.context.sinkSettled = true
    sink.cancel()
  }

  /// A head the parser refused: answered as the handler maps the error, then closed.
  private func refuse(_ error: HTTPRequestError) {
    let target = "/"
    let context = RequestContext(rawTarget: target)
    server.inFlight.add(1, ordering: .relaxed)
    server.contextsMade.add(1, ordering: .relaxed)
    let fallback = HTTPRequest(
      unvalidated: "", target: target, headers: [:], remoteAddress: remote, id: nil, version: "HTTP/1.1")
    context.request = fallback
    exchange = Exchange(context: context, request: fallback, hasBody: true, expectsContinue: false, chunked: false)
    parser.reset()
    headSince = nil
    closeAfter = true
    respond(server.handler.errorResponse(for: error, request: fallback), unreadBody: true)
  }

  // MARK: Writing

  /// Queues `response`; with `unreadBody` the connection closes after it, lingering.
  private func respond(_ response: HTTPResponse, unreadBody: Bool) {
    guard let exchange else { return }
    let isHead = exchange.context.method == "HEAD"
    var closing = closeAfter || unreadBody || server.draining.load(ordering: .relaxed)
    if case .lengthOnly = response.body, !isHead { closing = true }
    if let asked = response.headers["Connection"], asked.lowercased().contains("close") { closing = true }
    closeAfter = closing
    lingerAfter = unreadBody
    let status = response.status
    exchange.context.status = status
    let length = response.body.length
    // Written into a local buffer (the connection's, moved out and back): appends to a stored
    // property of a class pay an exclusivity check each, a measurable share of a small GET.
    var head = out
    out = []
    head.append(contentsOf: Self.statusLine(status))
    if let wire = response.headers.wire {
      head.append(contentsOf: wire)
    } else {
      for field in response.headers
      where !HTTPHeaders.same(field.name, "Content-Length") && !HTTPHeaders.same(field.name, "Connection") {
        let start = head.count
        head.append(contentsOf: field.name.utf8)
        head.append(contentsOf: ": ".utf8)
        head.append(contentsOf: field.value.utf8)
        // No CR or LF inside a field: it would end the head early (response splitting).
        let broken = head.withUnsafeBytes { HTTPHeaders.containsLineBreak(UnsafeRawBufferPointer(rebasing: $0[start...])) }
        guard !broken else {
          head.removeSubrange(start...)
          server.configuration.logger.warning(
            "dropped invalid response header \(field.name.debugDescription)",
            metadata: ["request_id": exchange.request.id])
          continue
        }
        head.append(contentsOf: "\r\n".utf8)
      }
    }
    head.append(contentsOf: "X-Request-Id: ".utf8)
    head.append(contentsOf: exchange.request.id.utf8)
    head.append(contentsOf: "\r\nDate: ".utf8)
    head.append(contentsOf: loop.date.utf8)
    head.append(contentsOf: "\r\n".utf8)
    if status != 204 && status != 304 && status >= 200 {
      head.append(contentsOf: "Content-Length: ".utf8)
      Self.appendDecimal(length, to: &head)
      head.append(contentsOf: "\r\n".utf8)
    }
    if closing {
      head.append(contentsOf: "Connection: close\r\n".utf8)
    } else if minorVersion == 0 {
      head.append(contentsOf: "Connection: keep-alive\r\n".utf8)
    }
    head.append(contentsOf: "\r\n".utf8)
    out = head
    exchange.context.bytesOut = isHead ? 0 : length
    phase = .responding
    guard !isHead else { return }
    switch response.body {
    case .empty, .lengthOnly: break
    case .bytes(let bytes):
      // Small bodies ride in the head's write; large ones go beside it in one writev.
      if bytes.count <= 16 * 1024 { out.append(contentsOf: bytes) } else { outBody = bytes }
    case .file(let body):
      if let descriptor = body.take() {
        file = (descriptor, body.offset, body.length)
      } else {
        closeAfter = true
      }
    case .stream(let body):
      if let descriptor = body.take() {
        stream = (descriptor, body.length)
      } else {
        closeAfter = true
      }
    }
  }

  private enum Flush { case done, wait, failed }

  private func flush() -> Flush {
    while outOffset < out.count || outBodyOffset < outBody.count {
      let n = out.withUnsafeBytes { head in
        outBody.withUnsafeBytes { body in
          var vectors = (
            iovec(
              iov_base: UnsafeMutableRawPointer(mutating: head.baseAddress.map { $0 + outOffset }),
              iov_len: head.count - outOffset),
            iovec(
              iov_base: UnsafeMutableRawPointer(mutating: body.baseAddress.map { $0 + outBodyOffset }),
              iov_len: body.count - outBodyOffset)
          )
          return withUnsafePointer(to: &vectors) {
            $0.withMemoryRebound(to: iovec.self, capacity: 2) { writev(fd, $0, 2) }
          }
        }
      }
      if n < 0 {
        if errno == EINTR { continue }
        return errno == EAGAIN || errno == EWOULDBLOCK ? .wait : .failed
      }
      lastActivity = .now
      let fromHead = min(n, out.count - outOffset)
      outOffset += fromHead
      outBodyOffset += n - fromHead
    }
    out.removeAll(keepingCapacity: true)
    outOffset = 0
    outBody = []
    outBodyOffset = 0
    if var f = file {
      while f.remaining > 0 {
        let n = LinuxIO.sendFile(fd, f.fd, offset: &f.offset, count: Int(min(f.remaining, 1 << 20)))
        if n > 0 {
          f.remaining -= Int64(n)
          lastActivity = .now
          continue
        }
        if n < 0 && errno == EINTR { continue }
        if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
          file = f
          return .wait
        }
        // The file ended short of its announced length, or the peer went away.
        return .failed
      }
      Glibc.close(f.fd)
      file = nil
    }
    if let s = stream {
      guard s.remaining > 0 else {
        Glibc.close(s.fd)
        stream = nil
        return .done
      }
      readStream(s.fd, upTo: Int(min(s.remaining, 64 * 1024)))
      return .wait
    }
    return .done
  }

  /// The next piece of a stream body, read from its pipe on a worker (the producer may stall).
  private func readStream(_ pipe: Int32, upTo size: Int) {
    phase = .working
    server.workers.submit { [self] in
      var chunk = [UInt8](repeating: 0, count: size)
      var got = 0
      while true {
        got = chunk.withUnsafeMutableBytes { read(pipe, $0.baseAddress, size) }
        if got < 0 && errno == EINTR { continue }
        break
      }
      if got > 0 && got < size { chunk.removeSubrange(got...) }
      let piece = chunk
      loop.post(
        Job {
          guard self.phase != .closed else {
            Glibc.close(pipe)
            return
          }
          guard got > 0 else {
            // The producer ended short: the client sees the body cut against its length.
            self.phase = .responding
            self.close(outcome: "error")
            return
          }
          self.outBody = piece
          self.stream?.remaining -= Int64(got)
          self.phase = .responding
          self.advance()
        })
    }
  }

  private func finishResponse() {
    guard let exchange else { return }
    self.exchange = nil
    server.end(exchange.context, outcome: "ok", remote: remote)
    if closeAfter || server.draining.load(ordering: .relaxed) {
      if lingerAfter { linger() } else { close(outcome: nil) }
      return
    }
    phase = .head
    headSince = .now
  }

  // MARK: Closing

  /// Half-closes and reads the client's unwanted bytes until it closes, `discardBudget` or
  /// `lingerTime` (RFC 9112 §9.6): closing with unread bytes would reset the connection, and
  /// the reset can destroy the answer before the client reads it.
  func linger() {
    Glibc.shutdown(fd, Int32(SHUT_WR))
    phase = .lingering
    lingerDeadline = .now + EpollServer.lingerTime
    discarded = 0
    server.lingering.add(1, ordering: .relaxed)
    drainLinger()
  }

  private func drainLinger() {
    while true {
      let n = recv(fd, buffer.baseAddress!, buffer.count, 0)
      if n > 0 {
        discarded += n
        if discarded > EpollServer.discardBudget { break }
        continue
      }
      if n < 0 && errno == EINTR { continue }
      if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
      break
    }
    close(outcome: nil)
  }

  func checkTimeouts(now: ContinuousClock.Instant) {
    let c = server.configuration
    let idle = c.connectionTimeout > 0 && now - lastActivity > .seconds(c.connectionTimeout)
    switch phase {
    case .head:
      let headLate = c.requestHeadTimeout > 0 && headSince.map { now - $0 > .seconds(c.requestHeadTimeout) } == true
      if idle || headLate { close(outcome: nil) }
    case .body, .responding:
      if idle { close(outcome: "timeout") }
    case .lingering:
      if now > lingerDeadline { close(outcome: nil) }
    case .working, .waiting, .closed:
      // Bounded by the work itself: a handler answering later bounds its own wait.
      break
    }
  }

  /// Draining: a handler answering later is asked to answer now (its answer closes the connection).
  func hurry() {
    responder?.stopWaiting(closed: false)
  }

  /// Closes the socket and ends the current exchange with `outcome` (nil: none was under way,
  /// or it ended already). A sink a worker is using is cancelled by that worker's continuation.
  func close(outcome: String?) {
    guard phase != .closed else { return }
    let working = phase == .working
    if phase == .lingering { server.lingering.subtract(1, ordering: .relaxed) }
    phase = .closed
    loop.forget(self)
    if workerOwnsSocket { closePending = true } else { Glibc.close(fd) }
    if counted { server.release(remote) }
    if let f = file { Glibc.close(f.fd) }
    file = nil
    if !working, let s = stream { Glibc.close(s.fd) }
    stream = nil
    if let responder {
      self.responder = nil
      responder.stopWaiting(closed: true)
    }
    if let exchange {
      if !working { cancelSink(exchange) }
      server.end(exchange.context, outcome: outcome ?? "client_abort", remote: remote)
    }
    exchange = nil
  }

  /// The reason phrase of `status` (RFC 9110 §15).
  /// `HTTP/1.1 200 OK\r\n`, made once per status this server answers with.
  static func statusLine(_ status: Int) -> [UInt8] {
    if let line = statusLines[status] { return line }
    return Array("HTTP/1.1 \(status) \(reason(status))\r\n".utf8)
  }

  private static let statusLines: [Int: [UInt8]] = Dictionary(
    uniqueKeysWithValues: (100..<600).map { ($0, Array("HTTP/1.1 \($0) \(reason($0))\r\n".utf8)) })

  /// `value` in decimal, without a String in between.
  static func appendDecimal(_ value: Int64, to bytes: inout [UInt8]) {
    guard value >= 0 else { return bytes.append(contentsOf: String(value).utf8) }
    var divisor: Int64 = 1
    while divisor <= value / 10 { divisor *= 10 }
    var rest = value
    repeat {
      bytes.append(UInt8(truncatingIfNeeded: rest / divisor) + 0x30)
      rest %= divisor
      divisor /= 10
    } while divisor > 0
  }

  static func reason(_ status: Int) -> String {
    switch status {
    case 100: "Continue"
    case 200: "OK"
    case 201: "Created"
    case 202: "Accepted"
    case 204: "No Content"
    case 206: "Partial Content"
    case 301: "Moved Permanently"
    case 302: "Found"
    case 303: "See Other"
    case 304: "Not Modified"
    case 307: "Temporary Redirect"
    case 308: "Permanent Redirect"
    case 400: "Bad Request"
    case 401: "Unauthorized"
    case 403: "Forbidden"
    case 404: "Not Found"
    case 405: "Method Not Allowed"
    case 408: "Request Timeout"
    case 409: "Conflict"
    case 410: "Gone"
    case 411: "Length Required"
    case 412: "Precondition Failed"
    case 413: "Content Too Large"
    case 414: "URI Too Long"
    case 415: "Unsupported Media Type"
    case 416: "Range Not Satisfiable"
    case 417: "Expectation Failed"
    case 422: "Unprocessable Content"
    case 423: "Locked"
    case 428: "Precondition Required"
    case 429: "Too Many Requests"
    case 431: "Request Header Fields Too Large"
    case 460: "Checksum Mismatch"
    case 500: "Internal Server Error"
    case 501: "Not Implemented"
    case 502: "Bad Gateway"
    case 503: "Service Unavailable"
    case 504: "Gateway Timeout"
    case 505: "HTTP Version Not Supported"
    case 507: "Insufficient Storage"
    default: "Unknown"
    }
  }
}
