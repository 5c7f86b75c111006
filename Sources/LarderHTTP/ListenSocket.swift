import Foundation

/// The listening socket every event loop watches; after binding port 0, `getsockname` gives
/// the real port.
struct ListenSocket {
  let descriptor: Int32
  let port: Int
  let isIPv6: Bool

  static func open(host: String, port: Int, backlog: Int) throws(HTTPServerError) -> ListenSocket {
    guard (0...65535).contains(port) else { throw .invalidHost("port \(port)") }
    let name = host == "localhost" ? "127.0.0.1" : host
    var v4 = sockaddr_in()
    var v6 = sockaddr_in6()
    let isIPv6: Bool
    if inet_pton(AF_INET, name, &v4.sin_addr) == 1 {
      isIPv6 = false
      v4.sin_family = sa_family_t(AF_INET)
      v4.sin_port = in_port_t(UInt16(port).bigEndian)
    } else if inet_pton(AF_INET6, name, &v6.sin6_addr) == 1 {
      isIPv6 = true
      v6.sin6_family = sa_family_t(AF_INET6)
      v6.sin6_port = in_port_t(UInt16(port).bigEndian)
    } else {
      throw .invalidHost(host)
    }
    let fd = socket(
      isIPv6 ? AF_INET6 : AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw .socket(operation: "socket", errno: errno) }
    var one: Int32 = 1
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
    if isIPv6 { setsockopt(fd, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &one, socklen_t(MemoryLayout<Int32>.size)) }
    let bound =
      isIPv6
      ? withUnsafePointer(to: &v6) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
        }
      }
      : withUnsafePointer(to: &v4) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
          bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
      }
    guard bound == 0 else {
      let e = errno
      close(fd)
      throw .socket(operation: "bind \(host):\(port)", errno: e)
    }
    guard listen(fd, Int32(backlog)) == 0 else {
      let e = errno
      close(fd)
      throw .socket(operation: "listen", errno: e)
    }
    // Every pool thread polls this socket; a blocking accept would stall the losers.
    _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
    var storage = sockaddr_storage()
    var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
    _ = withUnsafeMutablePointer(to: &storage) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    let actual =
      isIPv6
      ? withUnsafePointer(to: &storage) {
        $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_port }
      }
      : withUnsafePointer(to: &storage) {
        $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_port }
      }
    return ListenSocket(descriptor: fd, port: Int(UInt16(bigEndian: actual)), isIPv6: isIPv6)
  }
}

enum SocketAddress {
  /// An IPv4 or IPv6 address as text (`127.0.0.1`, `::1`), `""` for another family.
  static func text(_ address: UnsafePointer<sockaddr>) -> String {
    var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    switch Int32(address.pointee.sa_family) {
    case AF_INET:
      var a = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
      guard inet_ntop(AF_INET, &a, &buffer, socklen_t(buffer.count)) != nil else { return "" }
    case AF_INET6:
      var a = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
      guard inet_ntop(AF_INET6, &a, &buffer, socklen_t(buffer.count)) != nil else { return "" }
    default: return ""
    }
    return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}
