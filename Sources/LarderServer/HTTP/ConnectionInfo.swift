import CMicroHTTPD
import Foundation

/// `MHD_get_connection_info`, reached through `dlsym`.
///
/// The C function is variadic, and Swift does not import variadic C functions. For the
/// two info types used here no variadic argument is passed, and on the System V x86-64 and
/// AArch64 Linux ABIs such a call is identical to a non-variadic one.
/// TODO: replace with a non-variadic `static inline` wrapper in CMicroHTTPD/shim.h.
enum ConnectionInfo {
  typealias Function =
    @convention(c) (OpaquePointer?, MHD_ConnectionInfoType) -> UnsafePointer<MHD_ConnectionInfo>?

  static let function: Function? = {
    guard let symbol = dlsym(nil, "MHD_get_connection_info") else { return nil }
    return unsafeBitCast(symbol, to: Function.self)
  }()

  /// The peer address as text (`127.0.0.1`, `::1`), `""` when unknown.
  static func remoteAddress(_ connection: OpaquePointer?) -> String {
    guard let info = function?(connection, .CONNECTION_INFO_CLIENT_ADDRESS),
      let address = info.pointee.client_addr
    else { return "" }
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

  /// The status of the response queued on the connection (also one libmicrohttpd made
  /// itself, e.g. 431), or nil.
  static func queuedStatus(_ connection: OpaquePointer?) -> Int? {
    guard let info = function?(connection, .CONNECTION_INFO_HTTP_STATUS) else { return nil }
    return Int(info.pointee.http_status)
  }
}
