internal import CMicroHTTPD
import Foundation

/// `MHD_get_connection_info`, through the non-variadic wrapper in CMicroHTTPD's shim.
enum ConnectionInfo {
  static func function(_ connection: OpaquePointer?, _ type: MHD_ConnectionInfoType) -> UnsafePointer<MHD_ConnectionInfo>? {
    larder_mhd_connection_info(connection, type)
  }

  /// The peer address as text (`127.0.0.1`, `::1`), `""` when unknown.
  static func remoteAddress(_ connection: OpaquePointer?) -> String {
    guard let info = function(connection, .CONNECTION_INFO_CLIENT_ADDRESS),
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
    guard let info = function(connection, .CONNECTION_INFO_HTTP_STATUS) else { return nil }
    return Int(info.pointee.http_status)
  }
}
